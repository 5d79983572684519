#include "analysis/acceptance.h"

#include <limits>
#include <map>

#include "analysis/run_tables.h"
#include "core/base/error.h"

namespace draftlab::analysis {

double AlphaCount::alpha() const {
  return tested == 0 ? std::numeric_limits<double>::quiet_NaN()
                     : static_cast<double>(accepted) / static_cast<double>(tested);
}

std::vector<AlphaCount> n_alpha(const std::vector<const RunRecord*>& runs, int max_n) {
  check(max_n >= 0, "n_alpha: max_n must be >= 0");
  std::vector<AlphaCount> out(max_n + 1);
  for (int n = 0; n <= max_n; ++n) out[n].n = n;
  for (const RunRecord* run : runs) {
    const std::vector<int8_t> tested = parent_accepted(*run);
    const NodeRows& nodes = run->nodes;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const int n = nodes.depth[i] - 1;
      if (n < 0 || n > max_n || nodes.sibling_rank[i] != 0 || !tested[i]) continue;
      out[n].tested += 1;
      out[n].accepted += nodes.accepted[i] ? 1 : 0;
    }
  }
  return out;
}

std::vector<AlphaCount> cumulative_n_alpha(const std::vector<const RunRecord*>& runs, int max_n) {
  check(max_n >= 0, "cumulative_n_alpha: max_n must be >= 0");
  std::vector<AlphaCount> out(max_n + 1);
  for (int n = 0; n <= max_n; ++n) out[n].n = n;
  for (const RunRecord* run : runs) {
    const NodeRows& nodes = run->nodes;
    // A node is on the chain when it has rank 0 and its parent is on it (the root is).
    const std::vector<int8_t> parent_on_chain = parent_values(
        *run, 1, [&](size_t i, int8_t parent) { return static_cast<int8_t>(parent && nodes.sibling_rank[i] == 0); });
    for (size_t i = 0; i < nodes.size(); ++i) {
      const int n = nodes.depth[i] - 1;
      if (!parent_on_chain[i] || nodes.sibling_rank[i] != 0 || n < 0 || n > max_n) continue;
      out[n].tested += 1;
      out[n].accepted += nodes.accepted[i] ? 1 : 0;
    }
  }
  return out;
}

PositionAcceptance position_acceptance(const RunRecord& run) {
  const std::vector<int32_t> question = node_questions(run);
  const NodeRows& nodes = run.nodes;
  std::map<int32_t, int32_t> depth_of;  // tree_index -> depth, ordered
  for (size_t i = 0; i < nodes.size(); ++i) depth_of.emplace(nodes.tree_index[i], nodes.depth[i]);
  PositionAcceptance out;
  std::map<int32_t, Eigen::Index> column;
  for (const auto& [index, depth] : depth_of) {
    column[index] = static_cast<Eigen::Index>(out.positions.size());
    out.positions.push_back(index);
    out.depths.push_back(depth);
  }
  const auto nq = static_cast<Eigen::Index>(run.questions.size());
  const auto np = static_cast<Eigen::Index>(out.positions.size());
  out.drafted = Eigen::MatrixXd::Zero(nq, np);
  Eigen::MatrixXd accepted = Eigen::MatrixXd::Zero(nq, np);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Eigen::Index p = column[nodes.tree_index[i]];
    out.drafted(question[i], p) += 1;
    accepted(question[i], p) += nodes.accepted[i] ? 1 : 0;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  out.rate = (out.drafted.array() > 0).select(accepted.array() / out.drafted.array().max(1.0), nan).matrix();
  return out;
}

}  // namespace draftlab::analysis
