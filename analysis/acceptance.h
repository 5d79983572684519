// Acceptance of draft nodes: n-alpha (EAGLE Table 2) and per-position acceptance of static trees (EAGLE-2
// Figure 5).
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <vector>

#include "core/results/results_file.h"

namespace draftlab::analysis {

// n-alpha: among nodes at depth n + 1 whose parent was accepted (or is the root), the fraction accepted; so the
// draft saw n of its own (possibly imprecise) features before predicting this token. Counted over sibling-rank-0
// nodes: in a chain draft that is every node (the schema's definition), in a tree it is the chain along each
// node's most probable child, which keeps n-alpha a per-token rate rather than one diluted by the siblings
// that can never all be accepted.
struct AlphaCount {
  int n = 0;
  int64_t tested = 0;
  int64_t accepted = 0;
  double alpha() const;  // accepted / tested; NaN when tested == 0
};

// 0-alpha .. max_n-alpha of the runs pooled.
std::vector<AlphaCount> n_alpha(const std::vector<const RunRecord*>& runs, int max_n = 4);
inline std::vector<AlphaCount> n_alpha(const RunRecord& run, int max_n = 4) {
  return n_alpha(std::vector<const RunRecord*>{&run}, max_n);
}

// Cumulative n-alpha, as the official EAGLE code's getkacc counts it: among the nodes at depth n + 1 of each cycle's
// most probable chain (sibling rank 0 at every depth), the fraction accepted, i.e. the chance that the first n + 1
// tokens of that chain are all accepted. For a chain draft it is the product of the conditional n-alphas above.
std::vector<AlphaCount> cumulative_n_alpha(const std::vector<const RunRecord*>& runs, int max_n = 4);
inline std::vector<AlphaCount> cumulative_n_alpha(const RunRecord& run, int max_n = 4) {
  return cumulative_n_alpha(std::vector<const RunRecord*>{&run}, max_n);
}

// Per-question acceptance rate of each tree position (tree_index; P1 = 1): for static trees the position is a
// fixed place in the tree, so its rate across questions shows how much acceptance depends on the context.
struct PositionAcceptance {
  std::vector<int32_t> positions;  // tree_index values present, ascending
  std::vector<int32_t> depths;     // depth of each position (as first seen)
  Eigen::MatrixXd rate;            // [questions, positions]: accepted / drafted; NaN where never drafted
  Eigen::MatrixXd drafted;         // [questions, positions]: times the position was drafted
};
PositionAcceptance position_acceptance(const RunRecord& run);

}  // namespace draftlab::analysis
