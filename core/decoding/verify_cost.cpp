#include "core/decoding/verify_cost.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "core/base/error.h"

namespace draftlab {

VerifyCost::VerifyCost(std::vector<std::pair<int64_t, double>> points) : points_(std::move(points)) {
  check(!points_.empty() && points_.front().first == 1, "VerifyCost: the curve must start at n = 1");
  for (size_t i = 1; i < points_.size(); ++i)
    check(points_[i].first > points_[i - 1].first, "VerifyCost: n must increase");
}

VerifyCost VerifyCost::measure(const LlamaModel& target, int64_t max_n, int64_t prefix, int repeats, int batch) {
  check(batch >= 1, "VerifyCost: batch must be >= 1");
  const int64_t vocab = target.config().vocab_size;
  const int64_t context = target.config().max_position_embeddings;
  prefix = std::max<int64_t>(1, std::min(prefix, context / 2));
  max_n = std::max<int64_t>(1, std::min(max_n, context - prefix));
  std::vector<KvCache> caches;
  std::vector<int64_t> tokens(prefix);
  for (int b = 0; b < batch; ++b) {
    caches.push_back(target.make_cache(prefix + max_n));
    for (int64_t i = 0; i < prefix; ++i) tokens[i] = (i * 7919 + 13 * (b + 1)) % vocab;
    target.forward_chain(caches.back(), tokens, {ForwardOptions::Logits::None, {}, {}});
  }

  // Every n up to 8 (a CPU's budgets are small, and its kernels' row tiles make c(n) uneven there), then powers of
  // two. A warm-up forward of each size up to 16 first (the first forwards of a process pay for cold caches; the
  // larger sizes, the bulk of the time, come after them), then rounds that visit every size in turn, so that a
  // machine's speed drifting during the measurement moves all sizes alike; sizes up to 16 are cheap and get twice as
  // many rounds.
  std::vector<int64_t> sizes;
  for (int64_t n = 1; n <= max_n; n = n < 8 ? n + 1 : 2 * n) sizes.push_back(n);
  std::vector<std::vector<int64_t>> rows(sizes.size()), positions(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k)
    for (int64_t i = 0; i < sizes[k]; ++i) {
      rows[k].push_back((i * 31 + 5) % vocab);
      positions[k].push_back(prefix + i);
    }
  const auto time_forward = [&](size_t k) {
    std::vector<SequenceRows> sequences;
    for (auto& cache : caches) sequences.push_back({&cache, rows[k].data(), positions[k].data(), sizes[k], nullptr});
    auto t0 = std::chrono::steady_clock::now();
    target.forward_batch(sequences);  // logits of every row, as a verification needs
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto& cache : caches) cache.truncate(prefix);
    return dt / batch;
  };
  for (size_t k = 0; k < sizes.size() && sizes[k] <= 16; ++k) time_forward(k);
  std::vector<std::vector<double>> times(sizes.size());
  for (int r = 0; r < 2 * repeats; ++r)
    for (size_t k = 0; k < sizes.size(); ++k)
      if (sizes[k] <= 16 || r < repeats) times[k].push_back(time_forward(k));
  std::vector<std::pair<int64_t, double>> points;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::sort(times[k].begin(), times[k].end());
    points.emplace_back(sizes[k], times[k][times[k].size() / 2]);
  }
  return VerifyCost(non_decreasing(std::move(points)));
}

std::vector<std::pair<int64_t, double>> non_decreasing(std::vector<std::pair<int64_t, double>> points) {
  std::vector<std::pair<double, int>> blocks;  // mean, sizes pooled
  for (const auto& point : points) {
    blocks.emplace_back(point.second, 1);
    while (blocks.size() > 1 && blocks[blocks.size() - 2].first > blocks.back().first) {
      const auto [t1, c1] = blocks.back();
      blocks.pop_back();
      auto& [t0, c0] = blocks.back();
      t0 = (t0 * c0 + t1 * c1) / (c0 + c1);
      c0 += c1;
    }
  }
  size_t k = 0;
  for (const auto& [t, c] : blocks)
    for (int j = 0; j < c; ++j) points[k++].second = t;
  return points;
}

const VerifyCost& VerifyCost::shared(const LlamaModel& target, int64_t max_n, int batch) {
  static std::mutex mutex;
  // Keyed by the object and what it is (a model loaded later at a freed one's address gets its own curve unless it
  // is the same kind of model on the same path, whose curve it may share).
  static std::map<std::tuple<const LlamaModel*, std::string, int64_t, int>, std::unique_ptr<VerifyCost>> curves;
  const ModelConfig& c = target.config();
  const std::string what = target.path_description() + " " + std::to_string(c.hidden_size) + "x" +
                           std::to_string(c.num_hidden_layers) + " v" + std::to_string(c.vocab_size) + " e" +
                           std::to_string(c.num_local_experts);
  std::lock_guard<std::mutex> lock(mutex);
  auto& curve = curves[{&target, what, max_n, batch}];
  if (!curve) curve = std::make_unique<VerifyCost>(measure(target, max_n, 128, 3, batch));
  return *curve;
}

double VerifyCost::seconds(int64_t n) const {
  if (n <= points_.front().first) return points_.front().second;
  for (size_t i = 1; i < points_.size(); ++i) {
    if (n <= points_[i].first) {
      const auto [n0, s0] = points_[i - 1];
      const auto [n1, s1] = points_[i];
      return s0 + (s1 - s0) * static_cast<double>(n - n0) / static_cast<double>(n1 - n0);
    }
  }
  if (points_.size() == 1) return points_.back().second * static_cast<double>(n);
  const auto [n0, s0] = points_[points_.size() - 2];
  const auto [n1, s1] = points_.back();
  return s1 + (s1 - s0) * static_cast<double>(n - n1) / static_cast<double>(n1 - n0);
}

int32_t best_budget(const std::vector<float>& values, double alpha, double draft_seconds, const VerifyCost& cost,
                    double* tokens_per_second, const std::vector<int32_t>& depths, double level_seconds) {
  check(depths.empty() || depths.size() == values.size(), "best_budget: one depth per value expected");
  int32_t best = 0;
  double best_rate = 1.0 / (draft_seconds + cost.seconds(1));
  double expected = 1.0;
  int32_t deepest = 1;
  for (size_t m = 1; m <= values.size(); ++m) {
    expected += alpha * values[m - 1];
    if (!depths.empty()) deepest = std::max(deepest, depths[m - 1]);
    const double drafting = draft_seconds + level_seconds * static_cast<double>(deepest - 1);
    const double rate = expected / (drafting + cost.seconds(static_cast<int64_t>(m) + 1));
    if (rate > best_rate) {
      best_rate = rate;
      best = static_cast<int32_t>(m);
    }
  }
  if (tokens_per_second) *tokens_per_second = best_rate;
  return best;
}

bool another_token_may_pay(const std::vector<float>& expected, double next_bound, double draft_seconds,
                           double token_seconds, const VerifyCost& cost, int32_t room, double decay) {
  double now = 0.0;
  best_budget(expected, 1.0, draft_seconds, cost, &now);
  double tokens = 1.0;
  for (float e : expected) tokens += e;
  const auto k = static_cast<int64_t>(expected.size());
  double added = 0.0, next = next_bound;
  for (int32_t j = 1; j <= room; ++j, next *= decay) {
    added += next;
    if ((tokens + added) / (draft_seconds + j * token_seconds + cost.seconds(k + j + 1)) > now) return true;
  }
  return false;
}

}  // namespace draftlab
