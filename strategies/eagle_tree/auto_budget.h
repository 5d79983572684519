// total_tokens=auto (eagle2.h): each cycle, of the reranked nodes, the best-valued prefix that maximises expected
// tokens per second under this machine's verify cost curve and the acceptance observed so far (verify_cost.h), and
// what that choice carries to the next cycles: the calibration of values against accepted tokens, the running
// drafting time, a value cut-off below which nodes are not even expanded, and, once no tree pays, drafting skipped
// but for probes whose interval doubles while they keep choosing nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/decoding/draft_tree.h"
#include "core/decoding/verify_cost.h"
#include "strategies/draft_skipping.h"

namespace draftlab {

class AutoBudget {
 public:
  // fixed_draft_seconds: drafting's cost per cycle, fixed (auto_cost=F/P/D); empty: measured as cycles go.
  explicit AutoBudget(std::optional<double> fixed_draft_seconds = std::nullopt)
      : fixed_draft_seconds_(fixed_draft_seconds) {}

  // Called at the start of a cycle: false when the last choice was to verify nothing and this is not a probe
  // cycle (then the strategy drafts nothing and defers its head's sync). skipping() keeps the answer until the
  // next cycle; begin() clears it for a new sequence.
  bool drafts_this_cycle();
  bool skipping() const { return skipping_.skipping(); }
  void begin() { skipping_.begin(); }

  // A node valued below this need not be expanded: last cycle's cut-off with a margin (0: no cut-off).
  float prune_below() const { return prune_below_; }
  // The most levels and children per node this cycle's expansion needs: a budget of m nodes never uses more than m
  // of either, so the expansion follows the budget chosen last (m + 1: room to grow by one a cycle) instead of
  // paying the full depth x top_k every cycle; a probe after skipped cycles expands kProbeLimit; unlimited (0)
  // before the first choice.
  int32_t expansion_limit() const { return expansion_limit_; }

  // Of `kept` (reranked nodes of `tree`), the prefix in value order that maximises expected tokens per second,
  // returned in increasing flat order; draft_seconds: this cycle's drafting time so far.
  std::vector<int32_t> choose(const DraftTree& tree, std::vector<int32_t> kept, const VerifyCost& cost,
                              double draft_seconds);

  // After verification: the nodes accepted, and the seconds the head's sync took (calibration and drafting time;
  // a skipped cycle says nothing about drafting).
  void observe(int64_t accepted_nodes, double sync_seconds);

 private:
  std::optional<double> fixed_draft_seconds_;
  AcceptanceCalibration calibration_;
  double predicted_ = 0.0;       // sum of the values of the last tree's nodes
  double expand_seconds_ = 0.0;  // this cycle's drafting time before the budget choice
  double draft_seconds_ = 0.0;   // running estimate of drafting time per cycle (expansion + sync)
  DraftSkipping skipping_;
  static constexpr float kPruneSlack = 0.75f;  // margin for the next context being easier than this one
  float prune_below_ = 0.0f;
  static constexpr int32_t kProbeLimit = 2;
  int32_t expansion_limit_ = 0;
};

}  // namespace draftlab
