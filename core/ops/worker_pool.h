// WorkerPool - the native path's threads: a fixed set of workers that stay awake between the many small parallel
// steps of a forward.
//
// A 1 ms forward has about 80 parallel steps (four products and an attention per layer, the LM head). A fork/join
// per step (at::parallel_for over OpenMP) costs several microseconds of thread wake-up each, which is why two
// threads decoded no faster than one. Here the caller runs its share of a step itself and the workers spin
// (with pause) for a few microseconds after each step before they sleep on a condition variable, so the steps of
// one forward hand work over without a system call, and between forwards the cores are free for other work
// (libtorch's own threads during drafting). Torch-free.
//
// One step at a time: run() calls from several threads are serialised; a job must not call run() itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace draftlab {

class WorkerPool {
 public:
  // The process's pool (workers are started on first use, as many as the largest `threads` asked for, minus one).
  static WorkerPool& instance();

  // Runs job(t, threads) for t = 0 .. threads - 1, t = 0 on the calling thread, and returns when all are done.
  // threads <= 1 runs job(0, 1) inline; at most 255 threads.
  void run(int threads, const std::function<void(int, int)>& job);

  // [begin, end) cut into `parts` contiguous ranges whose sizes differ by at most one: range p.
  static std::pair<int64_t, int64_t> split(int64_t begin, int64_t end, int parts, int p);

  ~WorkerPool();

 private:
  WorkerPool() = default;
  void grow(int workers);
  void work(int index, uint64_t seen);

  std::mutex run_mutex_;  // one step at a time
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  std::vector<std::thread> workers_;
  // One word per step: (step counter << 8) | threads. A worker reads a step's number and thread count in one load,
  // so one that sat a step out never takes the next step's count for the old one.
  std::atomic<uint64_t> step_{0};
  std::atomic<int> pending_{0};  // workers still running the current step
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  const std::function<void(int, int)>* job_ = nullptr;  // written before step_, read by the step's workers
};

}  // namespace draftlab
