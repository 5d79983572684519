// total_tokens=auto (eagle2.h): each cycle, of the reranked nodes, the best-valued prefix that maximises expected
// tokens per second under this machine's verify cost curve and the acceptance observed so far (verify_cost.h), and
// what that choice carries to the next cycles: the calibration of values against accepted tokens, the running
// drafting time, a value cut-off below which nodes are not even expanded, and, once no tree pays, drafting skipped
// but for probes whose interval doubles while they keep choosing nothing.
//
// Calibration: a node's chance of acceptance given its parent's is its confidence times a factor learned per class
// (first or later sibling, by confidence) from the trials, the nodes whose parent was accepted (at T = 0 also those
// drafted but not verified: the target's token says whether they would have been); its expected acceptance is the
// product of those chances down its path. One factor for every path value (accepted / predicted
// over whole trees) kept later siblings, whose values overestimate their acceptance, in place of deeper first
// choices, whose values underestimate it, and accepted less than a chain of the same size.
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
      : fixed_draft_seconds_(fixed_draft_seconds), calibration_(calibrations()) {
    skipping_.measure_rates(!fixed_draft_seconds_);  // measured costs: checked against the clock (draft_skipping.h)
  }

  // Called at the start of a cycle: false when the last choice was to verify nothing and this is not a probe
  // cycle (then the strategy drafts nothing and defers its head's sync). skipping() keeps the answer until the
  // next cycle; begin() clears it for a new sequence.
  bool drafts_this_cycle();
  bool skipping() const { return skipping_.skipping(); }
  void begin() { skipping_.begin(); }
  // Tests: the clock cycles are timed by (draft_skipping.h).
  void use_clock(DraftSkipping::Clock::time_point (*now)()) { skipping_.use_clock(now); }

  // A node valued below this need not be expanded: last cycle's cut-off with a margin (0: no cut-off).
  float prune_below() const { return prune_below_; }
  // How far this cycle's expansion needs to go: levels, and nodes expanded per level (also their children each). The
  // tree chosen last needs one level more than its deepest node and one node more than its widest level (room to
  // grow by one a cycle), instead of the full depth x top_k every cycle; a probe after skipped cycles expands
  // kProbeLimit of each; 0 (unlimited) before the first choice.
  int32_t expansion_depth() const { return expansion_depth_; }
  int32_t expansion_width() const { return expansion_width_; }

  // Of `kept` (reranked nodes of `tree`, every node's parent among them, else Error), the prefix in value order that maximises
  // expected tokens per second, returned in increasing flat order; draft_seconds: this cycle's drafting time so far;
  // greedy: T = 0 (the target's tokens then say which unverified nodes would have been accepted too).
  std::vector<int32_t> choose(const DraftTree& tree, std::vector<int32_t> kept, const VerifyCost& cost,
                              double draft_seconds, bool greedy = true);

  // After verification: the nodes of the verified tree (indices into the subtree of choose()'s nodes) the target
  // agreed with, in path order; the target's token after them (-1: not known, as beyond a commit limit); and the
  // seconds the head's sync took (calibration and drafting time; a skipped cycle says nothing about drafting).
  void observe(const std::vector<int32_t>& matched_nodes, int64_t next_token, double sync_seconds);

  // The calibration class of a node: its confidence's bin (kConfidenceBins), first child or later sibling.
  static int32_t calibration_class(const DraftNode& node);
  // A node's chance of acceptance given its parent's, as calibrated so far.
  double conditional_acceptance(const DraftNode& node) const;

 private:
  static std::vector<AcceptanceCalibration> calibrations();
  std::optional<double> fixed_draft_seconds_;
  // Upper edges of the confidence bins (the last one 1).
  static constexpr float kConfidenceBins[] = {0.1f, 0.2f, 0.35f, 0.5f, 0.7f, 0.85f, 1.0f};
  // Per class, factor = accepted / summed confidence, starting at 1 (confidence taken at its word) with the weight of
  // two trials: enough to stop one acceptance of a 0.05 node from tripling it. A class sees about a trial a cycle, and
  // how well a head's confidence is calibrated is a property of the head more than of the context: a long memory
  // (0.97 a cycle made the classes noisy enough to cost tau).
  static constexpr double kCalibrationDecay = 0.995;
  std::vector<AcceptanceCalibration> calibration_;
  struct Candidate {
    int32_t calibration_class;
    float confidence;
    int64_t token;
    int32_t parent;  // candidate index, or kRoot
  };
  static constexpr int32_t kRoot = -1;
  std::vector<Candidate> candidates_;  // the nodes the last choice saw, in flat order
  std::vector<int32_t> verified_;      // the candidates it kept, in subtree order
  bool greedy_ = true;
  bool chosen_ = false;           // choose() ran since the last observe()
  double expand_seconds_ = 0.0;  // this cycle's drafting time before the budget choice
  // Drafting time, estimated from the measured cycles (0: none yet): per cycle (sync, first level, reranking) and per
  // further level (one draft forward); the weighted sums they come from.
  double cycle_seconds_ = 0.0, level_seconds_ = 0.0;
  struct {
    double w = 0, x = 0, y = 0, xx = 0, xy = 0;
  } fit_;  // expansion seconds y against levels - 1 x
  double sync_seconds_ = 0.0;  // weighted sum (weights as fit_.w)
  int32_t levels_ = 0;  // the levels of the last expansion; 0 when it was no measure of the next ones
  // This cycle is a probe after skipped cycles: its head first took in the features it missed, a cost of having
  // skipped that grows with the stretch, not of drafting. Learned as drafting time, it made the cycles after a probe
  // that paid look too costly, and drafting stopped again.
  bool catching_up_ = false, skipped_ = false;
  DraftSkipping skipping_;
  static constexpr float kPruneSlack = 0.75f;  // margin for the next context being easier than this one
  float prune_below_ = 0.0f;
  static constexpr int32_t kProbeLimit = 2;
  int32_t expansion_depth_ = 0, expansion_width_ = 0;
};

}  // namespace draftlab
