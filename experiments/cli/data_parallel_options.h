// The data-parallel flag and the join of a job, for the commands that run on several ranks (train-lm, train-head,
// gen-head-data). Who is who comes from the launcher's environment (core/distributed/launch_environment.h):
//   torchrun --nproc-per-node 2 $(which draftlab) train-head ...   (or: draftlab launch --nproc 2 train-head ...)
//   srun --ntasks 2 draftlab train-head ...
//   mpirun -n 2 draftlab train-head ...
#pragma once

#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "core/base/error.h"
#include "core/distributed/data_parallel.h"

namespace draftlab::cli {

// The flags of a job's ranks: how long to wait for the others, and the gradient bucket size.
struct DataParallelFlags {
  double timeout_s = 300;
  double bucket_mb = 25;  // MiB, DDP's default
};

// Both checked as they are parsed (before anything loads).
inline void add_data_parallel_options(boost::program_options::options_description& desc, DataParallelFlags& f) {
  namespace po = boost::program_options;
  desc.add_options()("dist-timeout", po::value(&f.timeout_s)->default_value(f.timeout_s)->notifier([](double v) {
    check(v > 0, "--dist-timeout: expected a positive number of seconds, got " + std::to_string(v));
  }),
                     "several ranks (torchrun, srun, mpirun, draftlab launch): seconds the rendezvous and each "
                     "collective wait for the other ranks before every rank ends with an error")(
      "dist-bucket-mb", po::value(&f.bucket_mb)->default_value(f.bucket_mb)->notifier([](double v) {
        check(v > 0, "--dist-bucket-mb: expected a positive number of MiB, got " + std::to_string(v));
      }),
      "several ranks: gradients are summed in buckets of at most this many MiB (a larger gradient is a bucket alone)");
}

// The job this process is a rank of, or null when the environment names none (one process).
inline std::shared_ptr<DataParallel> join_data_parallel(const DataParallelFlags& f, at::Device device) {
  const LaunchEnvironment env = read_launch_environment();
  if (!env.distributed()) return nullptr;
  DataParallel::Options options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  options.bucket_bytes = std::max<int64_t>(1, static_cast<int64_t>(f.bucket_mb * (1 << 20)));
  auto parallel = std::make_shared<DataParallel>(env, options, device);
  if (parallel->is_main())
    std::fprintf(stderr, "data parallel: %d ranks (%s, rendezvous at %s:%d)\n", env.world_size, env.launcher.c_str(),
                 env.master_addr.c_str(), env.master_port);
  return parallel;
}

}  // namespace draftlab::cli
