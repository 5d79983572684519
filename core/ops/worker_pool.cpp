#include "core/ops/worker_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace draftlab {

namespace {

// How long a worker spins after a step before it yields and then sleeps: a few microseconds (a pause is ~65 cycles
// on Zen), longer than the gaps between the steps of one forward, short enough not to hold a core while the
// caller does other work between forwards. Spinning for ~0.4 ms starved libtorch's OpenMP threads during EAGLE
// drafting (eagle2 6/4/2 at 0.14x vanilla on two threads).
constexpr int kSpinIterations = 200;

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

WorkerPool& WorkerPool::instance() {
  static WorkerPool pool;
  return pool;
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

std::pair<int64_t, int64_t> WorkerPool::split(int64_t begin, int64_t end, int parts, int p) {
  const int64_t n = end - begin, base = n / parts, extra = n % parts;
  const int64_t first = begin + p * base + std::min<int64_t>(p, extra);
  return {first, first + base + (p < extra ? 1 : 0)};
}

void WorkerPool::grow(int workers) {
  while (static_cast<int>(workers_.size()) < workers) {
    const int index = static_cast<int>(workers_.size());
    // The step before the one run() is about to publish: a worker reading step_ itself could start after the
    // publication, take the new step for one it has seen, and leave run() waiting for it.
    workers_.emplace_back([this, index, seen = step_.load()] { work(index, seen); });
  }
}

void WorkerPool::run(int threads, const std::function<void(int, int)>& job) {
  if (threads <= 1) {
    job(0, 1);
    return;
  }
  threads = std::min(threads, 255);
  std::lock_guard<std::mutex> one_step(run_mutex_);
  grow(threads - 1);
  job_ = &job;
  pending_.store(threads - 1);
  step_.store((((step_.load() >> 8) + 1) << 8) | static_cast<uint64_t>(threads));  // publishes job_ (seq_cst)
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    wake_.notify_all();
  }
  job(0, threads);
  // Spin for the others, yielding once the wait is long: a worker without a core of its own (more threads than
  // free cores) must get one to finish.
  for (int spins = 0; pending_.load() > 0; ++spins) {
    if (spins < kSpinIterations) cpu_relax();
    else std::this_thread::yield();
  }
}

void WorkerPool::work(int index, uint64_t seen) {
  for (;;) {
    int spins = 0;
    while (step_.load() == seen && !stop_.load()) {
      if (++spins < kSpinIterations) {
        cpu_relax();
        continue;
      }
      if (spins < 2 * kSpinIterations) {  // then give the core away a while before sleeping
        std::this_thread::yield();
        continue;
      }
      // Sleep until the next step. sleepers_ rises before the predicate is checked under the lock, and run()
      // publishes the step before it reads sleepers_, so a step is never missed.
      std::unique_lock<std::mutex> lock(wake_mutex_);
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] { return step_.load() != seen || stop_.load(); });
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = step_.load();
    // A worker the step needs: run() waits for it, so job_ stays this step's until pending_ falls.
    const int t = index + 1, threads = static_cast<int>(seen & 0xff);
    if (t < threads) {
      (*job_)(t, threads);
      pending_.fetch_sub(1);
    }
  }
}

}  // namespace draftlab
