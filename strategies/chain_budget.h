// ChainBudget - gamma=auto (chain) and depth=auto (eagle-chain): how many tokens a chain drafter drafts each cycle,
// decided token by token from this machine's verify cost curve (core/decoding/verify_cost.h), the drafter's own cost
// per token and the chain's values (products of its confidences) calibrated against what the target accepted; and,
// as eagle2's total_tokens=auto does, whether to draft at all (draft_skipping.h).
//
// A further token is expected to be worth the last one's value times the drafter's typical confidence per token
// (learned from the chains drawn; the bound "worth as much as the last" before any), so it is drawn only when its
// expected value can pay for its drafting and verification. At T > 0 (tokens drawn from q) a token's value predicts
// little, and each depth is expected at its recent acceptance (the share of verified chains that got past it).
//
// Calibration is per depth: a draft model's confidences are often off by a factor that grows along the chain (ts-draft
// at 0.3 a token is accepted about twice as often, so its products fall far faster than its acceptance), which one
// factor for the whole chain (eagle2's) would turn into chains cut too short.
//
// Lossless at any temperature: whether token k + 1 is drawn depends only on the tokens already in the chain (a
// stopping rule), and the drafted chain is cut afterwards to its best prefix only at T = 0. At T > 0 a cut decided
// by a drawn token's own value would change the distribution that position's draft comes from, and the output with
// it (the verifier divides by q).
//
// The parallel drafters (pard, peagle, dflash: k=auto) draw all their slots in one forward, then offer them to the
// same rule: start() before the forward, so the first token's time is the forward's and the later ones cost next to
// nothing, then chain_of_slots() below. Whether slot i + 1 is kept still depends only on slots 1..i, and slot i + 1
// was drawn from its own q whatever is kept, so the rule stays lossless there too.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/decoding/draft_tree.h"
#include "core/decoding/verify_cost.h"
#include "core/model/llama_model.h"
#include "core/model/sampler.h"
#include "strategies/auto_cost.h"
#include "strategies/draft_skipping.h"

namespace draftlab {

class ChainBudget {
 public:
  // max_depth: the most tokens a cycle drafts; fixed: auto_cost=F/P/D (D per drafted token), else measured (the
  // target's cost curve, VerifyCost::shared, and the drafter's own time per token).
  ChainBudget(const LlamaModel& target, int32_t max_depth, std::optional<FixedCosts> fixed);

  void begin() {
    skipping_.begin();
    catching_up_ = true;
  }
  // Start of a cycle: false when drafting does not pay and this is not a probe (draft nothing then).
  bool drafts_this_cycle() {
    const bool drafts = skipping_.drafts_this_cycle();
    // "Recent" is in cycles, drafted or not: what was seen before a stretch of skipped cycles weighs less against
    // the next probe, so one probe that pays resumes drafting (stopping takes several cycles that do not). A cycle
    // that only measures plain decoding is no stretch; its next cycle catches up on one token all the same.
    if (!drafts && !skipping_.measuring()) {
      recent_tokens_ *= kRecentMemory;
      recent_seconds_ *= kRecentMemory;
    }
    if (!drafts) catching_up_ = true;
    return drafts;
  }

  // Drafting a cycle: start(), then after each drafted token another(its value): whether to draft the next one
  // (never more than `room` = min(max_depth, what the request allows) in all). drawn_at_once: a parallel drafter,
  // whose one forward (timed from start()) drew every slot, so a further token costs nothing more to draft.
  void start(int32_t room, int32_t batch_size, bool drawn_at_once = false);
  bool another(const DraftNode& last) { return another(last.value, last.distribution >= 0); }
  // sampled: the token was drawn from a q (T > 0). Its value then says little about its acceptance (min(1, p/q) is
  // about as likely at q 0.01 as at 0.3: calibrating by it kept PARD's chains at one token and stopped drafting
  // where two paid), so at T > 0 each depth is expected at its own recent acceptance instead (value 1 calibrated).
  bool another(float value, bool sampled = false);
  // After drafting `chain` (nodes 0, 1, ... in chain order, one value each given to another()): at T = 0 (may_cut)
  // cuts it to its best prefix; decides whether the next cycles draft. Returns the tokens kept.
  int32_t finish(DraftTree& chain, bool may_cut);
  // What the target accepted of the chain finish() last returned (once; a cycle without a chain is ignored).
  void observe(int64_t accepted);

  int32_t max_depth() const { return max_depth_; }
  // How many slots a parallel drafter's next forward should draw: one more than the last chain verified (the room to
  // grow, as eagle2's expansion goes one level below its kept tree); max_depth before any.
  int32_t reach() const { return std::min(max_depth_, observed_ > 0 ? verified_ + 1 : max_depth_); }

  using Clock = std::chrono::steady_clock;
  // Tests: the clock the measured drafting times are read from.
  void use_clock(Clock::time_point (*now)()) {
    now_ = now;
    skipping_.use_clock(now);
  }

 private:
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
  Clock::time_point (*now_)() = &Clock::now;
  Clock::time_point start_, last_token_;
  // A draft that skipped cycles, or starts a sequence, first takes in every token it missed (the prompt, the skipped
  // cycles' tokens) with its first token: a cost of having stopped, not of drafting, that grows with the stretch
  // skipped. Judged with it, probes after ever longer stretches never paid (PARD stopped for good where k = 2 paid
  // 1.06-1.32x). Such a catching-up cycle is judged at the steady first-token time: a running mean over cycles that
  // follow a drafting cycle.
  bool catching_up_ = true;
  double first_seconds_ = 0.0;          // this cycle's first token's time (start() to the first another())
  double steady_first_seconds_ = -1.0;  // < 0: none measured yet
  double token_seconds_ = 0.0;         // one more token's drafting time: fixed, or a running mean of measured ones
  bool second_seen_ = false;           // a chain of two or more tokens measured token_seconds_
  bool drawn_at_once_ = false;         // this cycle's slots came from one forward
  int32_t verified_ = 0;               // tokens of values_ sent to verification
  static constexpr int kLearningCycles = 8;
  static constexpr double kRecentMemory = 0.8;
  double recent_tokens_ = 0.0, recent_seconds_ = 0.0;  // expected tokens and seconds of recent drafting cycles
  int observed_ = 0;                   // verified chains seen
  bool pending_ = false;               // finish() ran since the last observe()
};

// The options of a chain strategy whose `depth` option also takes "auto": its cap (`max_option`, default
// `default_max`; `cap_meaning` says what 0 means where 0 is allowed) and auto_cost.
std::vector<OptionSpec> chain_budget_options(const std::string& depth, const std::string& max_option,
                                             int64_t default_max = 16, const std::string& cap_meaning = "");
// The budget when options[depth] is "auto" (capped at options[max_option]), else none.
std::optional<ChainBudget> chain_budget_from(const LlamaModel& target, const std::string& strategy,
                                             const StrategyOptions& options, const std::string& depth,
                                             const std::string& max_option);

// A parallel drafter's chain: node i from slot i's logits (logits [slots, vocab], drafted_token.h). With a budget
// (k=auto; started before the forward), slots are added while one more may pay, then finish() cuts at T = 0.
DraftTree chain_of_slots(const at::Tensor& logits, Sampler& sampler, ChainBudget* budget);

}  // namespace draftlab
