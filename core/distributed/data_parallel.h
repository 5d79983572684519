// DataParallel - the process group of a data-parallel job and the few collectives training needs.
//
// Every rank holds the whole model and computes the loss of its rows of each step's batch (BatchPart); the ranks'
// gradients are summed in buckets (sum_gradients), so each rank's optimizer takes the same step. The losses are
// written so that the ranks' losses add up to the loss of the whole batch (each rank divides its sums by the
// whole step's count): the result equals one process training on the same global batch, up to the order of
// floating-point additions, whatever the world size.
//
// Backends (c10d, inside libtorch): Gloo for CPU tensors; NCCL for CUDA tensors when libtorch was built with it
// (USE_C10D_NCCL; Debian's CPU libtorch is not, so that branch is compiled and tested only on CUDA builds).
// Rendezvous: rank 0 hosts a c10d TCPStore at LaunchEnvironment's master address and port.
//
// Failures: the rendezvous and every collective give up after Options::timeout; a rank that dies closes its
// connections, and the other ranks' next collective fails at once. Either way every surviving rank throws
// Error ("data parallel: rank 1 of 2: all-reduce of the gradients failed: ...") instead of hanging.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/distributed/launch_environment.h"

namespace draftlab {

class DataParallel {
 public:
  struct Options {
    std::chrono::milliseconds timeout{std::chrono::seconds(300)};  // rendezvous and each collective
    int64_t bucket_bytes = 25 << 20;  // gradients travel in buckets of at most this size (DDP's default, 25 MiB)
  };

  // What this rank has put through the collectives so far, as payload bytes (a ring all-reduce moves about
  // 2 (world - 1) / world times its payload through each rank's link, each way).
  struct Traffic {
    int64_t gradient_syncs = 0, gradient_bytes = 0, gradient_buckets = 0;  // sum_gradients
    double gradient_seconds = 0;  // wall time in sum_gradients: the transfer and any wait for a slower rank
    int64_t other_all_reduce_bytes = 0, other_all_reduce_calls = 0;     // losses, counts, flags
    int64_t broadcast_bytes = 0, gather_bytes = 0;
  };

  // Joins the job: rendezvous, then a Gloo (or NCCL, for a CUDA `device`) process group. Throws Error naming the
  // rendezvous address when the other ranks do not arrive within the timeout.
  DataParallel(const LaunchEnvironment& env, const Options& options, at::Device device = at::kCPU);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool is_main() const { return env_.rank == 0; }
  // "data parallel: 2 ranks; per step 0.935 MB of gradients all-reduced in 1 bucket(s) and ..." for the log.
  std::string traffic_line() const;

  // Whether this rank takes work item `item` of a list dealt out in turns (validation batches): item % world == rank.
  bool takes(int64_t item) const { return item % env_.world_size == env_.rank; }

  // Rank 0's values of `tensors`, copied into every rank's tensors in place.
  void broadcast_from_main(const std::vector<at::Tensor>& tensors);
  // Sums the gradients of `parameters` over the ranks, in place, in buckets. A parameter with a gradient on some
  // ranks gets zeros on the others first; one without a gradient on every rank keeps none (as AdamW skips it).
  void sum_gradients(const std::vector<at::Tensor>& parameters);
  // Element-wise sums over the ranks (float64; every rank passes the same length).
  std::vector<double> sum(std::vector<double> values);
  double sum(double value) { return sum(std::vector<double>{value})[0]; }
  // On rank 0: every rank's `values` (any length), in rank order; on the others: empty.
  std::vector<std::vector<int64_t>> gather_to_main(const std::vector<int64_t>& values);
  // On rank 0: every rank's `tensor` (the same shape and dtype on every rank), in rank order; others: empty.
  std::vector<at::Tensor> gather_to_main(const at::Tensor& tensor);
  // True on every rank iff `ok` is true on every rank: rank 0's checkpoint failing must end the others too.
  bool all_ok(bool ok);
  // Returns once every rank has called it.
  void barrier();

 private:
  // Waits for a collective, turning c10d's errors and timeouts into Error naming this rank and `what`.
  void wait(const std::string& what, const std::function<void()>& collective);

  LaunchEnvironment env_;
  Options options_;
  at::Device device_;
  struct Group;  // the c10d store and process group (their headers stay in data_parallel.cpp)
  std::unique_ptr<Group> group_;
  Traffic traffic_;
};

}  // namespace draftlab
