#include "strategies/eagle_tree/auto_budget.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <string>

#include "core/base/error.h"

namespace draftlab {

int32_t AutoBudget::calibration_class(const DraftNode& node) {
  const auto* bin = std::lower_bound(std::begin(kConfidenceBins), std::end(kConfidenceBins) - 1, node.confidence);
  return 2 * static_cast<int32_t>(bin - std::begin(kConfidenceBins)) + (node.sibling_rank > 0 ? 1 : 0);
}

std::vector<AcceptanceCalibration> AutoBudget::calibrations() {
  std::vector<AcceptanceCalibration> out;
  float low = 0.0f;
  for (float high : kConfidenceBins) {
    // Two trials at the bin's middle confidence.
    for (int rank = 0; rank < 2; ++rank) out.emplace_back(kCalibrationDecay, 2.0 * 0.5 * (low + high));
    low = high;
  }
  return out;
}

double AutoBudget::conditional_acceptance(const DraftNode& node) const {
  return std::min(1.0, calibration_[calibration_class(node)].alpha() * node.confidence);
}

bool AutoBudget::drafts_this_cycle() {
  // A weak head, or a draft as costly as the target: when the last choice was nothing, skip the expansion too, but
  // for probes (draft_skipping.h).
  if (!skipping_.drafts_this_cycle()) {
    // The next draft is a probe; after a cycle that only measured plain decoding, it goes on as before.
    if (!skipping_.measuring()) expansion_depth_ = expansion_width_ = kProbeLimit;
    skipped_ = true;
    return false;
  }
  catching_up_ = skipped_;
  skipped_ = false;
  return true;
}

std::vector<int32_t> AutoBudget::choose(const DraftTree& tree, std::vector<int32_t> kept, const VerifyCost& cost,
                                        double draft_seconds, bool greedy) {
  expand_seconds_ = draft_seconds;
  chosen_ = true;
  // Expected acceptance: calibrated conditional chances multiplied down the path (flat order puts parents first).
  std::sort(kept.begin(), kept.end());
  const std::vector<int32_t> candidates = kept;
  std::vector<float> expected(static_cast<size_t>(tree.size()), 0.0f);
  for (int32_t i : kept) {
    const DraftNode& n = tree.node(i);
    expected[i] = static_cast<float>(conditional_acceptance(n) * (n.parent >= 0 ? expected[n.parent] : 1.0));
  }
  // Value order, parents before children on ties (a child's expectation never exceeds its parent's).
  std::stable_sort(kept.begin(), kept.end(), [&](int32_t a, int32_t b) { return expected[a] > expected[b]; });
  std::vector<float> values;
  std::vector<int32_t> depths;
  for (int32_t i : kept) {
    values.push_back(expected[i]);
    depths.push_back(tree.node(i).depth);
  }
  // Drafting: fixed per cycle (auto_cost), or as measured, a part per cycle and a part per level drafted. The first
  // expansion (unlimited: top_k nodes a level) is no measure of the later ones.
  const bool limited = expansion_depth_ > 0;
  const int32_t levels = tree.max_depth();
  const double draft = fixed_draft_seconds_.value_or(cycle_seconds_);
  const double level = fixed_draft_seconds_ ? 0.0 : level_seconds_;
  double rate = 0.0;
  const int32_t m = best_budget(values, 1.0, draft, cost, &rate, depths, level);
  // This cycle's draft is paid for: verify its best prefix. Whether the next cycles draft at all compares drafting,
  // its cost included, with plain decoding (drafting_pays); a draft that is worth verifying once paid for can still
  // lose to not drafting.
  skipping_.chose(drafting_pays(m, rate, cost));
  kept.resize(m);
  std::sort(kept.begin(), kept.end());
  // Next cycle expands only nodes whose value is near or above the least valued node kept (values, not expectations:
  // the expansion sees values); none when the budget was not binding.
  float least = std::numeric_limits<float>::max();
  std::vector<int32_t> per_level(static_cast<size_t>(levels) + 1, 0);
  for (int32_t i : kept) {
    least = std::min(least, tree.node(i).value);
    ++per_level[tree.node(i).depth];
  }
  prune_below_ = (m > 0 && m < static_cast<int32_t>(values.size())) ? kPruneSlack * least : 0.0f;
  expansion_depth_ = 1, expansion_width_ = 1;
  for (int32_t d = 1; d <= levels; ++d)
    if (per_level[d] > 0) {
      expansion_depth_ = d + 1;
      expansion_width_ = std::max(expansion_width_, per_level[d] + 1);
    }
  levels_ = limited ? levels : 0;  // 0: no measure of the next expansions
  // What observe() needs: every node the choice saw, and which of them were verified (in subtree order).
  std::vector<int32_t> candidate_index(static_cast<size_t>(tree.size()), kRoot);
  for (size_t c = 0; c < candidates.size(); ++c) candidate_index[candidates[c]] = static_cast<int32_t>(c);
  candidates_.clear();
  for (int32_t i : candidates) {
    const DraftNode& n = tree.node(i);
    check(n.parent < 0 || candidate_index[n.parent] != kRoot,
          [&] { return "AutoBudget::choose: node " + std::to_string(i) + " given without its parent"; });
    candidates_.push_back({calibration_class(n), n.confidence, n.token, n.parent < 0 ? kRoot : candidate_index[n.parent]});
  }
  verified_.clear();
  for (int32_t i : kept) verified_.push_back(candidate_index[i]);
  greedy_ = greedy;
  return kept;
}

void AutoBudget::observe(const std::vector<int32_t>& matched_nodes, int64_t next_token, double sync_seconds) {
  if (!chosen_) return;  // a cycle without a choice (skipped) says nothing about drafting
  chosen_ = false;
  skipping_.committed(static_cast<int64_t>(matched_nodes.size()) + 1);
  const auto n = static_cast<int32_t>(candidates_.size());
  // The matched path among the candidates, and the target's token below each of its nodes (kUnknown: not known).
  constexpr int64_t kUnknown = -1;
  std::vector<bool> on_path(static_cast<size_t>(n), false), verified(static_cast<size_t>(n), false);
  std::vector<int64_t> target_below(static_cast<size_t>(n) + 1, kUnknown);  // [parent + 1]: -1 = the root
  int32_t last = -1;
  for (int32_t v : verified_) verified[v] = true;
  for (int32_t i : matched_nodes) {
    if (i < 0 || i >= static_cast<int32_t>(verified_.size())) continue;
    const int32_t c = verified_[i];
    on_path[c] = true;
    target_below[candidates_[c].parent + 1] = candidates_[c].token;
    last = c;
  }
  target_below[last + 1] = next_token;
  // The trials: nodes whose parent was accepted (a node below a rejection says nothing about its own chance). At
  // T = 0 acceptance is the target's own token, known below every node of the path: every drafted child there is a
  // trial, verified or not, so a class the budget never verifies still learns. At T > 0 acceptance is drawn: only
  // verified nodes.
  std::vector<double> predicted(calibration_.size(), 0.0), accepted(calibration_.size(), 0.0);
  for (int32_t c = 0; c < n; ++c) {
    const Candidate& x = candidates_[c];
    if (x.parent != kRoot && !on_path[x.parent]) continue;
    bool success;
    if (greedy_) {
      const int64_t target = target_below[x.parent + 1];
      if (target == kUnknown) continue;
      success = x.token == target;
    } else {
      if (!verified[c]) continue;
      success = on_path[c];
    }
    predicted[x.calibration_class] += x.confidence;
    accepted[x.calibration_class] += success ? 1.0 : 0.0;
  }
  // Only classes with trials learn (and forget): the others keep what they knew.
  for (size_t c = 0; c < calibration_.size(); ++c)
    if (predicted[c] > 0.0) calibration_[c].observe(predicted[c], accepted[c]);
  // Each level below the first is one draft forward: expansion = a + b (levels - 1), fitted over the measured
  // cycles (exponentially weighted least squares); the sync, a running mean. A probe catching up is no measure.
  if (levels_ == 0 || catching_up_) return;
  const double decay = 0.95, x = levels_ - 1, y = expand_seconds_;
  for (double* sum : {&fit_.w, &fit_.x, &fit_.y, &fit_.xx, &fit_.xy, &sync_seconds_}) *sum *= decay;
  fit_.w += 1.0, fit_.x += x, fit_.y += y, fit_.xx += x * x, fit_.xy += x * y, sync_seconds_ += sync_seconds;
  const double spread = fit_.w * fit_.xx - fit_.x * fit_.x;
  // Levels that hardly varied cannot split the two: then all of it is per level (at least one level).
  level_seconds_ = spread > 0.1 * fit_.w * fit_.w ? std::max(0.0, (fit_.w * fit_.xy - fit_.x * fit_.y) / spread)
                                                  : fit_.y / std::max(fit_.x, fit_.w);
  cycle_seconds_ = std::max(0.0, (fit_.y - level_seconds_ * fit_.x) / fit_.w) + sync_seconds_ / fit_.w;
}

}  // namespace draftlab
