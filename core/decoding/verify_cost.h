// VerifyCost - how long one target forward of n new tokens takes on this machine, measured, and the draft budget
// that maximises tokens per second given the draft's own estimate of what will be accepted.
//
// Why: a tree of m nodes costs c(m + 1) to verify and yields 1 + (accepted nodes) tokens. EAGLE-2's value of a
// node (product of confidences along its path) estimates the chance the node is accepted, so for nodes ranked by
// value v_1 >= v_2 >= ..., keeping the first m yields about 1 + alpha * (v_1 + ... + v_m) tokens, where alpha
// corrects for miscalibration (observed accepted / predicted). The best m maximises that over the cycle's cost.
// The official code instead times forwards of 40-60 tokens once and fixes the budget; this follows the
// measured curve and the observed acceptance every cycle.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/llama_model.h"

namespace draftlab {

class VerifyCost {
 public:
  // Measures forwards of n = 1, 2, ..., 8, 16, 32, ..., max_n new tokens after `prefix` cached tokens: a warm-up
  // of each n <= 16, then the median of `repeats` rounds over all sizes (2 x repeats for n <= 16), made non-decreasing in n
  // (non_decreasing). Uses a scratch cache; the model is not changed. batch > 1: forwards of `batch` sequences of
  // n tokens each in one batched forward (LlamaModel::forward_batch), the curve holding each sequence's share
  // (seconds / batch): what one sequence's n rows cost when every sequence of the batch verifies as many.
  static VerifyCost measure(const LlamaModel& target, int64_t max_n = 64, int64_t prefix = 128, int repeats = 3,
                            int batch = 1);
  // measure(target, max_n, 128, 3, batch), measured once per model object and process and shared: the strategies of
  // a batch's sequences (one object each) use one curve.
  static const VerifyCost& shared(const LlamaModel& target, int64_t max_n, int batch);

  // A curve given directly: points (n, seconds), n increasing from 1.
  explicit VerifyCost(std::vector<std::pair<int64_t, double>> points);

  // Seconds for a forward of n tokens: linear between measured points, extrapolated linearly past the last.
  double seconds(int64_t n) const;
  const std::vector<std::pair<int64_t, double>>& points() const { return points_; }

 private:
  std::vector<std::pair<int64_t, double>> points_;
};

// A cost curve made non-decreasing in n by isotonic regression (pool adjacent violators: where a larger n measured
// cheaper, the sizes involved share their mean), so that noise does not make a size look cheaper than a smaller one.
std::vector<std::pair<int64_t, double>> non_decreasing(std::vector<std::pair<int64_t, double>> points);

// Best number of nodes m in [0, values.size()] to verify, for nodes in verification order (values descending,
// parents first): maximises (1 + alpha * sum_{i<m} values[i]) / (draft_seconds + cost.seconds(m + 1)). The rate it
// reaches (tokens per second) goes to *tokens_per_second when given. depths (empty, or one per value): a tree drafted
// a level per draft forward (the first level coming with the sync) pays level_seconds for each level below the first
// that the prefix reaches, so drafting m nodes whose deepest is at depth D costs draft_seconds + level_seconds (D - 1).
int32_t best_budget(const std::vector<float>& values, double alpha, double draft_seconds, const VerifyCost& cost,
                    double* tokens_per_second = nullptr, const std::vector<int32_t>& depths = {},
                    double level_seconds = 0.0);

// Whether drafting pays at all: best_budget's choice m at its rate, drafting included, beats plain decoding's
// 1 / c(1) (no draft, one token per forward). best_budget's m = 0 still pays draft_seconds, so it only says that
// this cycle's draft, already paid for, is not worth verifying; this says whether the next cycles should draft.
inline bool drafting_pays(int32_t best_m, double tokens_per_second, const VerifyCost& cost) {
  return best_m > 0 && tokens_per_second > 1.0 / cost.seconds(1);
}

// Chains drafted token by token (gamma=auto, depth=auto; strategies/chain_budget.h): whether drafting one more token
// could still raise tokens per second. expected: each drafted token's expected acceptance (its value, calibrated);
// next_bound: at most what any further token can add; draft_seconds: the chain's drafting time so far;
// token_seconds: what one more token costs to draft; room: how many more are allowed. When no length up to `room`
// at next_bound per token beats the best prefix of the chain as it is, no real continuation will. decay < 1 makes
// it an expectation instead of a bound: further token j adds next_bound decay^(j - 1) (the chain's values shrink by
// the drafter's typical confidence per token).
bool another_token_may_pay(const std::vector<float>& expected, double next_bound, double draft_seconds,
                           double token_seconds, const VerifyCost& cost, int32_t room, double decay = 1.0);

// Running calibration alpha = accepted / predicted, with exponential forgetting so it follows the context.
class AcceptanceCalibration {
 public:
  // prior: how many predicted tokens' worth of "alpha = 1" it starts with. 1 suits a tree's summed values; a chain's
  // deep tokens, valued a few hundredths each, need a lighter one to move within a sequence.
  explicit AcceptanceCalibration(double decay = 0.95, double prior = 1.0) : decay_(decay), prior_(prior) {}
  void observe(double predicted, double accepted) {
    predicted_ = decay_ * predicted_ + predicted;
    accepted_ = decay_ * accepted_ + accepted;
  }
  // Starts at 1 (EAGLE-2 section 3.2: confidence is well calibrated), pulled towards the data as it comes.
  double alpha() const { return (accepted_ + prior_) / (predicted_ + prior_); }

 private:
  double decay_, prior_;
  double predicted_ = 0.0, accepted_ = 0.0;
};

}  // namespace draftlab
