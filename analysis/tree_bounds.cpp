#include "analysis/tree_bounds.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "analysis/run_tables.h"
#include "core/base/error.h"

namespace draftlab::analysis {

double value_expected_tau(const RunRecord& run) {
  const CycleRows& cycles = run.cycles;
  if (cycles.size() == 0) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (size_t c = 0; c < cycles.size(); ++c) {
    const auto [begin, end] = cycle_nodes(run, c);
    sum += 1.0;
    for (int64_t i = begin; i < end; ++i) {
      const float v = run.nodes.value[i];
      if (!std::isfinite(v)) return std::numeric_limits<double>::quiet_NaN();
      sum += v;
    }
  }
  return sum / static_cast<double>(cycles.size());
}

double chain_formula_tau(const std::vector<double>& alpha) {
  double tau = 1.0, survive = 1.0;
  for (double a : alpha) {
    if (!std::isfinite(a)) break;
    survive *= a;
    tau += survive;
  }
  return tau;
}

std::vector<AlphaCount> rank_acceptance(const RunRecord& run, int max_rank) {
  check(max_rank >= 0, "rank_acceptance: max_rank must be >= 0");
  std::vector<AlphaCount> out(max_rank + 1);
  for (int r = 0; r <= max_rank; ++r) out[r].n = r;
  const std::vector<int8_t> tested = parent_accepted(run);
  for (size_t i = 0; i < run.nodes.size(); ++i) {
    const int r = run.nodes.sibling_rank[i];
    if (r < 0 || r > max_rank || !tested[i]) continue;
    out[r].tested += 1;
    out[r].accepted += run.nodes.accepted[i] ? 1 : 0;
  }
  return out;
}

OptimalTrees::OptimalTrees(std::vector<double> p, int max_nodes, int max_depth)
    : p_(std::move(p)), max_nodes_(max_nodes), max_depth_(max_depth) {
  if (max_nodes < 0 || max_depth < 0)
    throw Error("OptimalTrees: expected max_nodes >= 0 and max_depth >= 0, got " + std::to_string(max_nodes) + ", " +
                std::to_string(max_depth));
  for (size_t r = 0; r < p_.size(); ++r)
    if (!(p_[r] >= 0.0 && p_[r] <= 1.0))
      throw Error("OptimalTrees: acceptance of rank " + std::to_string(r) + ": expected a probability in [0, 1], got " +
                  std::to_string(p_[r]));
  const int N = max_nodes_, R = static_cast<int>(p_.size());
  const size_t width = static_cast<size_t>(N) + 1;
  const double none = -std::numeric_limits<double>::infinity();
  best_.assign(static_cast<size_t>(max_depth_ + 1) * width, 0.0);
  ranks_.assign(best_.size(), 0);
  std::vector<int32_t> budget(best_.size(), 0);
  size_.assign(static_cast<size_t>(max_depth_ + 1) * (R + 1) * width, 0);
  // forest[r][m]: best value of children of ranks 0..r-1 (all present) whose subtree budgets sum to exactly m.
  std::vector<double> forest((R + 1) * width), next(width);
  for (int d = 1; d <= max_depth_; ++d) {
    std::fill(forest.begin(), forest.end(), none);
    forest[0] = 0.0;
    double* row = &best_[static_cast<size_t>(d) * width];
    int32_t* row_ranks = &ranks_[static_cast<size_t>(d) * width];
    int32_t* row_budget = &budget[static_cast<size_t>(d) * width];
    for (int r = 1; r <= R; ++r) {
      int32_t* sizes = &size_[(static_cast<size_t>(d) * (R + 1) + r) * width];
      for (int m = 1; m <= N; ++m) {
        double top = none;
        for (int s = 1; s <= m; ++s) {
          const double before = forest[(r - 1) * width + (m - s)];
          if (before == none) continue;
          const double v = before + p_[r - 1] * (1.0 + best(d - 1, s - 1));
          if (v > top) {
            top = v;
            sizes[m] = s;
          }
        }
        forest[r * width + m] = top;
      }
    }
    // best(d, m): the best forest over rank counts and budgets up to m (extra nodes are never forced in).
    for (int m = 0; m <= N; ++m) {
      row[m] = 0.0;
      for (int r = 0; r <= R; ++r)
        for (int used = 0; used <= m; ++used)
          if (forest[r * width + used] > row[m] + 1e-15) {
            row[m] = forest[r * width + used];
            row_ranks[m] = r;
            row_budget[m] = used;
          }
    }
  }
  budget_ = std::move(budget);
}

double OptimalTrees::expected_tau(int n) const {
  if (n < 0 || n > max_nodes_)
    throw Error("OptimalTrees::expected_tau: expected 0 <= n <= " + std::to_string(max_nodes_) + ", got " +
                std::to_string(n));
  return 1.0 + best(max_depth_, n);
}

void OptimalTrees::build(int d, int m, const std::vector<int32_t>& prefix,
                         std::vector<std::vector<int32_t>>& out) const {
  if (d == 0 || m == 0) return;
  const size_t width = static_cast<size_t>(max_nodes_) + 1, R = p_.size();
  int remaining = budget_[static_cast<size_t>(d) * width + m];
  for (int r = ranks_[static_cast<size_t>(d) * width + m]; r >= 1; --r) {
    const int s = size_[(static_cast<size_t>(d) * (R + 1) + r) * width + remaining];
    std::vector<int32_t> child = prefix;
    child.push_back(r - 1);
    out.push_back(child);
    build(d - 1, s - 1, child, out);
    remaining -= s;
  }
}

std::vector<std::vector<int32_t>> OptimalTrees::paths(int n) const {
  if (n < 0 || n > max_nodes_)
    throw Error("OptimalTrees::paths: expected 0 <= n <= " + std::to_string(max_nodes_) + ", got " + std::to_string(n));
  std::vector<std::vector<int32_t>> out;
  build(max_depth_, n, {}, out);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  return out;
}

}  // namespace draftlab::analysis
