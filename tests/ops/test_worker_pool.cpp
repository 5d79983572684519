// WorkerPool against a plain count: every thread index of a step runs exactly once and the step is complete when
// run() returns, over many steps whose thread counts change (a worker that sat a step out must not run the next
// step twice), and split() covers a range exactly in balanced parts.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/ops/worker_pool.h"

namespace draftlab {
namespace {

TEST(WorkerPool, EveryIndexRunsOncePerStepAsThreadCountsChange) {
  WorkerPool& pool = WorkerPool::instance();
  const int counts[] = {2, 3, 1, 4, 2, 2, 4, 3};
  std::vector<std::atomic<int>> runs(4);
  for (int step = 0; step < 3000; ++step) {
    const int threads = counts[step % 8];
    for (auto& r : runs) r.store(0);
    std::atomic<int> wrong_count{0};
    pool.run(threads, [&](int t, int n) {
      if (n != threads) wrong_count.fetch_add(1);
      runs[t].fetch_add(1);
    });
    ASSERT_EQ(wrong_count.load(), 0) << "step " << step;
    for (int t = 0; t < 4; ++t) ASSERT_EQ(runs[t].load(), t < threads ? 1 : 0) << "step " << step << " index " << t;
  }
}

TEST(WorkerPool, SleepingWorkersWakeForTheNextStep) {
  WorkerPool& pool = WorkerPool::instance();
  pool.run(2, [](int, int) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the spin: the worker sleeps
  std::atomic<int> ran{0};
  pool.run(2, [&](int, int) { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), 2);
}

TEST(WorkerPool, SplitCoversTheRangeInBalancedParts) {
  for (int64_t n : {0, 1, 7, 16, 101})
    for (int parts : {1, 2, 3, 5}) {
      int64_t next = 3, smallest = n, largest = 0;
      for (int p = 0; p < parts; ++p) {
        const auto [b, e] = WorkerPool::split(3, 3 + n, parts, p);
        ASSERT_EQ(b, next) << n << " " << parts;
        next = e;
        smallest = std::min(smallest, e - b);
        largest = std::max(largest, e - b);
      }
      EXPECT_EQ(next, 3 + n);
      EXPECT_LE(largest - smallest, 1);
    }
}

}  // namespace
}  // namespace draftlab
