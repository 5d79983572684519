#include "strategies/eagle_tree/auto_budget.h"

#include <algorithm>
#include <numeric>

#include "strategies/eagle_tree/eagle_tree.h"

namespace draftlab {

bool AutoBudget::drafts_this_cycle() {
  // A weak head, or a draft as costly as the target: when the last choice was nothing, skip the expansion too, but
  // for probes (draft_skipping.h).
  if (!skipping_.drafts_this_cycle()) {
    predicted_ = 0.0;
    expand_seconds_ = 0.0;
    expansion_limit_ = kProbeLimit;  // the next draft is a probe
    return false;
  }
  return true;
}

std::vector<int32_t> AutoBudget::choose(const DraftTree& tree, std::vector<int32_t> kept, const VerifyCost& cost,
                                        double draft_seconds) {
  expand_seconds_ = draft_seconds;
  std::sort(kept.begin(), kept.end(), ByValue{tree});
  std::vector<float> values;
  for (int32_t i : kept) values.push_back(tree.node(i).value);
  const double draft = fixed_draft_seconds_.value_or(draft_seconds_);
  double rate = 0.0;
  const int32_t m = best_budget(values, calibration_.alpha(), draft, cost, &rate);
  // This cycle's draft is paid for: verify its best prefix. Whether the next cycles draft at all compares drafting,
  // its cost included, with plain decoding (drafting_pays); a draft that is worth verifying once paid for can still
  // lose to not drafting.
  skipping_.chose(drafting_pays(m, rate, cost));
  // Next cycle expands only nodes near or above this cycle's cut-off; none when the budget was not binding.
  prune_below_ = (m > 0 && m < static_cast<int32_t>(values.size())) ? kPruneSlack * values[m - 1] : 0.0f;
  expansion_limit_ = m + 1;
  kept.resize(m);
  predicted_ = std::accumulate(values.begin(), values.begin() + m, 0.0);
  std::sort(kept.begin(), kept.end());
  return kept;
}

void AutoBudget::observe(int64_t accepted_nodes, double sync_seconds) {
  if (expand_seconds_ <= 0.0) return;  // skipped cycles say nothing about drafting
  calibration_.observe(predicted_, static_cast<double>(accepted_nodes));
  draft_seconds_ = 0.8 * draft_seconds_ + 0.2 * (expand_seconds_ + sync_seconds);
}

}  // namespace draftlab
