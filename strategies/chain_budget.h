// ChainBudget - gamma=auto (chain) and depth=auto (eagle-chain): how many tokens a chain drafter drafts each cycle,
// decided token by token from this machine's verify cost curve (core/decoding/verify_cost.h), the drafter's own cost
// per token and the chain's values (products of its confidences) calibrated against what the target accepted; and,
// as eagle2's total_tokens=auto does, whether to draft at all (draft_skipping.h).
//
// A further token is expected to be worth the last one's value times the drafter's typical confidence per token
// (learned from the chains drawn; the bound "worth as much as the last" before any), so it is drawn only when its
// expected value can pay for its drafting and verification.
//
// Calibration is per depth: a draft model's confidences are often off by a factor that grows along the chain (ts-draft
// at 0.3 a token is accepted about twice as often, so its products fall far faster than its acceptance), which one
// factor for the whole chain (eagle2's) would turn into chains cut too short.
//
// Lossless at any temperature: whether token k + 1 is drawn depends only on the tokens already in the chain (a
// stopping rule), and the drafted chain is cut afterwards to its best prefix only at T = 0. At T > 0 a cut decided
// by a drawn token's own value would change the distribution that position's draft comes from, and the output with
// it (the verifier divides by q).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/decoding/draft_tree.h"
#include "core/decoding/verify_cost.h"
#include "core/model/llama_model.h"
#include "strategies/auto_cost.h"
#include "strategies/draft_skipping.h"

namespace draftlab {

class ChainBudget {
 public:
  // max_depth: the most tokens a cycle drafts; fixed: auto_cost=F/P/D (D per drafted token), else measured (the
  // target's cost curve, VerifyCost::shared, and the drafter's own time per token).
  ChainBudget(const LlamaModel& target, int32_t max_depth, std::optional<FixedCosts> fixed);

  void begin() { skipping_.begin(); }
  // Start of a cycle: false when drafting does not pay and this is not a probe (draft nothing then).
  bool drafts_this_cycle() { return skipping_.drafts_this_cycle(); }

  // Drafting a cycle: start(), then after each drafted token another(its value): whether to draft the next one
  // (never more than `room` = min(max_depth, what the request allows) in all).
  void start(int32_t room, int32_t batch_size);
  bool another(float value);
  // After drafting `chain` (nodes 0, 1, ... in chain order, one value each given to another()): at T = 0 (may_cut)
  // cuts it to its best prefix; decides whether the next cycles draft. Returns the tokens kept.
  int32_t finish(DraftTree& chain, bool may_cut);
  // What the target accepted of the chain finish() last returned (once; a cycle without a chain is ignored).
  void observe(int64_t accepted);

  int32_t max_depth() const { return max_depth_; }

 private:
  using Clock = std::chrono::steady_clock;
  const VerifyCost& cost() const;
  double drafting_seconds() const;

  const LlamaModel& target_;
  int32_t max_depth_;
  std::optional<FixedCosts> fixed_;
  int32_t batch_size_ = 1;
  DraftSkipping skipping_;
  static constexpr double kCalibrationPrior = 0.1;
  std::vector<AcceptanceCalibration> calibration_;  // per depth
  std::vector<float> expected() const;             // values_ calibrated
  std::vector<float> values_;          // this cycle's chain
  // The drafter's typical confidence per token (a running mean of value_k / value_{k-1} over drawn tokens): a further
  // token's expected value is the last one's times this, not the last one's (the bound, which drew a token the cut
  // then dropped in most cycles). 0 until a second token has been drawn: the bound until then.
  double confidence_ = 0.0;
  int32_t room_ = 0;
  Clock::time_point start_, last_token_;
  double token_seconds_ = 0.0;         // one more token's drafting time: fixed, or a running mean of measured ones
  int32_t verified_ = 0;               // tokens of values_ sent to verification
  static constexpr int kLearningCycles = 8;
  int observed_ = 0;                   // verified chains seen
  bool pending_ = false;               // finish() ran since the last observe()
};

// The options of a chain strategy whose `depth` option also takes "auto": its cap (`max_option`) and auto_cost.
std::vector<OptionSpec> chain_budget_options(const std::string& depth, const std::string& max_option);
// The budget when options[depth] is "auto" (capped at options[max_option]), else none.
std::optional<ChainBudget> chain_budget_from(const LlamaModel& target, const std::string& strategy,
                                             const StrategyOptions& options, const std::string& depth,
                                             const std::string& max_option);

}  // namespace draftlab
