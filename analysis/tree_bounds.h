// What a run's recorded acceptance says is reachable: the expected acceptance length from the draft's own node
// values (EAGLE-2's tree value), the chain formula (Leviathan et al.), the acceptance of each sibling rank, and
// Sequoia's optimal tree for that per-rank acceptance (its dynamic program, arXiv 2402.12374 section 3.1).
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/acceptance.h"
#include "core/results/results_file.h"

namespace draftlab::analysis {

// Mean over cycles of 1 + sum of the cycle's node values (value = product of confidences along the path, the
// draft's own estimate that the node is accepted): the acceptance length the draft expects. NaN for a run without
// cycles or with a node whose value is NaN (strategies that record no confidence).
double value_expected_tau(const RunRecord& run);

// The chain formula: 1 + sum_k prod_{i<=k} alpha_i (alpha_i: the chance position i is accepted given every
// earlier one was). Stops at the first NaN (a position never tested).
double chain_formula_tau(const std::vector<double>& alpha);

// Acceptance per sibling rank, pooled over depths: among tested nodes (parent accepted or the root) of
// sibling_rank r, the fraction accepted; r = 0 .. max_rank. Sequoia's "positional acceptance" vector.
std::vector<AlphaCount> rank_acceptance(const RunRecord& run, int max_rank = 7);

// Sequoia's optimal tree: for acceptance p[r] of the rank-r child of an accepted node (independent of depth and
// context, Sequoia's positional assumption), the tree of at most n nodes, at most max_depth deep, whose expected
// acceptance length 1 + sum over nodes of prod_{ancestors and itself} p[rank] is largest, for every n up to
// max_nodes. Ranks are used in order (a rank-r child only beside ranks 0..r-1), as a top-k drafter proposes them.
class OptimalTrees {
 public:
  OptimalTrees(std::vector<double> p, int max_nodes, int max_depth);

  int max_nodes() const { return max_nodes_; }
  // Expected acceptance length (bonus token included) of the best tree of at most n nodes.
  double expected_tau(int n) const;
  // That tree as root-to-node paths of sibling ranks, parents before children (data/trees/*.json's "paths").
  std::vector<std::vector<int32_t>> paths(int n) const;

 private:
  // best_[d][m]: largest expected accepted count below an accepted node using at most m nodes within depth d.
  double best(int d, int m) const { return best_[static_cast<size_t>(d) * (max_nodes_ + 1) + m]; }
  void build(int d, int m, const std::vector<int32_t>& prefix, std::vector<std::vector<int32_t>>& out) const;

  std::vector<double> p_;
  int max_nodes_, max_depth_;
  std::vector<double> best_;
  // ranks_[d][m], budget_[d][m]: how many ranks the best forest uses and the nodes they share; size_[(d, r, m)]:
  // the budget of rank r's child (itself included) when ranks 0..r share exactly m.
  std::vector<int32_t> ranks_, budget_, size_;
};

}  // namespace draftlab::analysis
