#include "strategies/chain_budget.h"

#include <algorithm>
#include <numeric>

#include "core/decoding/drafted_token.h"

namespace draftlab {

ChainBudget::ChainBudget(const LlamaModel& target, int32_t max_depth, std::optional<FixedCosts> fixed)
    : target_(target), max_depth_(max_depth), fixed_(std::move(fixed)),
      calibration_(static_cast<size_t>(std::max(max_depth, 1)), AcceptanceCalibration(0.95, kCalibrationPrior)) {
  skipping_.measure_rates(!fixed_);
}

std::vector<float> ChainBudget::expected() const {
  std::vector<float> e(values_.size());
  for (size_t k = 0; k < values_.size(); ++k) e[k] = static_cast<float>(calibration_[k].alpha() * values_[k]);
  return e;
}

const VerifyCost& ChainBudget::cost() const {
  return fixed_ ? fixed_->verify : VerifyCost::shared(target_, max_depth_ + 1, batch_size_);
}

double ChainBudget::drafting_seconds() const {
  if (fixed_) return fixed_->draft_seconds * static_cast<double>(values_.size());
  const double seconds = std::chrono::duration<double>(now_() - start_).count();
  if (catching_up_ && steady_first_seconds_ >= 0.0 && !values_.empty())
    return seconds - first_seconds_ + steady_first_seconds_;
  return seconds;
}

void ChainBudget::start(int32_t room, int32_t batch_size, bool drawn_at_once) {
  values_.clear();
  drawn_at_once_ = drawn_at_once;
  room_ = std::min(room, max_depth_);
  batch_size_ = batch_size;
  cost();  // a measured curve is measured now, before the clock starts
  start_ = last_token_ = now_();
}

bool ChainBudget::another(float value, bool sampled) {
  if (sampled) value = 1.0f;  // calibrated per depth, alpha_k is then depth k's acceptance (marginal)
  if (!sampled && !values_.empty() && values_.back() > 0.0f) {
    const double ratio = static_cast<double>(value) / values_.back();
    confidence_ = confidence_ > 0.0 ? 0.9 * confidence_ + 0.1 * ratio : ratio;
  }
  values_.push_back(value);
  const Clock::time_point now = now_();
  if (values_.size() == 1) first_seconds_ = std::chrono::duration<double>(now - start_).count();
  if (fixed_) {
    token_seconds_ = fixed_->draft_seconds;
  } else if (drawn_at_once_) {
    token_seconds_ = 0.0;  // the one forward drew every slot: one more costs only its verification
  } else {
    // The first token's time holds the draft's sync with what was accepted (paid whatever the length); the price of
    // one more token is what the later ones cost: a running mean of those; until there is one, the least first
    // token's time (a bound: an outlier, a first cycle's warm-up, must not stop every chain at one token for good).
    const double seconds = std::chrono::duration<double>(now - last_token_).count();
    if (values_.size() > 1) token_seconds_ = second_seen_ ? 0.8 * token_seconds_ + 0.2 * seconds : seconds;
    else if (!second_seen_) token_seconds_ = token_seconds_ > 0.0 ? std::min(token_seconds_, seconds) : seconds;
    second_seen_ = second_seen_ || values_.size() > 1;
  }
  last_token_ = now;
  const int32_t left = room_ - static_cast<int32_t>(values_.size());
  if (left <= 0) return false;
  const size_t n = values_.size();  // < calibration_.size(): left > 0
  if (sampled) {
    // T > 0: the next depth at its own acceptance, the ones after it shrinking as it did from this one (a depth not
    // yet verified is at the prior, 1: drafted until it is).
    const double next = calibration_[n].alpha(), here = calibration_[n - 1].alpha();
    const double decay = here > 0.0 ? std::min(1.0, next / here) : 0.0;
    return another_token_may_pay(expected(), next, drafting_seconds(), token_seconds_, cost(), left, decay);
  }
  // T = 0: a further token's value is expected at the last one's times the typical confidence (at most the last
  // one's before any is known); its calibration at most the largest of the deeper depths'.
  double scale = 0.0;
  for (size_t k = n; k < calibration_.size(); ++k) scale = std::max(scale, calibration_[k].alpha());
  const double decay = confidence_ > 0.0 ? std::min(1.0, confidence_) : 1.0;
  const double next = std::min(1.0, scale * value * decay);
  return another_token_may_pay(expected(), next, drafting_seconds(), token_seconds_, cost(), left, decay);
}

int32_t ChainBudget::finish(DraftTree& chain, bool may_cut) {
  double rate = 0.0;
  int32_t best = best_budget(expected(), 1.0, drafting_seconds(), cost(), &rate);
  if (!may_cut) {
    // At T > 0 the whole chain is verified (a cut by drawn values would change the output's distribution), so the
    // verdict below follows its rate, not the best prefix's.
    const std::vector<float> e = expected();
    best = static_cast<int32_t>(e.size());
    rate = std::accumulate(e.begin(), e.end(), 1.0) / (drafting_seconds() + cost().seconds(best + 1));
  }
  // Whether the next cycles draft follows the last few cycles' expected tokens over their time (running sums), not
  // one cycle's rate: a chain's values swing with the context from cycle to cycle, and one unlucky cycle stopped
  // drafting for a whole probe interval (P-EAGLE's head, paying on average, drafted in none of README's prompts). The
  // first cycle is left out: it carries the draft's first-forward set-up (20-45 ms against about 1), as are cycles
  // catching up before a steady first-token time is known.
  if (observed_ > 0 && (fixed_ || !catching_up_ || steady_first_seconds_ >= 0.0)) {
    const double seconds = drafting_seconds() + cost().seconds(best + 1);
    recent_tokens_ = kRecentMemory * recent_tokens_ + rate * seconds;
    recent_seconds_ = kRecentMemory * recent_seconds_ + seconds;
  }
  // Judged only once the per-depth calibration has seen a few chains: it starts at alpha 1, which a draft model's
  // low confidences (ts-draft's) turn into "nothing pays" before its first verdicts come in, and skipping (probes
  // only, their interval doubling) would keep it from learning otherwise within a short answer.
  // Sums that hold no cycle yet (every one so far was catching up) say nothing: drafting goes on.
  skipping_.chose(observed_ < kLearningCycles || recent_seconds_ <= 0.0 ||
                  recent_tokens_ / recent_seconds_ > 1.0 / cost().seconds(1));
  if (!fixed_ && !catching_up_ && !values_.empty())
    steady_first_seconds_ = steady_first_seconds_ < 0.0 ? first_seconds_ : 0.8 * steady_first_seconds_ + 0.2 * first_seconds_;
  catching_up_ = false;
  verified_ = best;
  pending_ = true;
  if (verified_ < chain.size()) {
    std::vector<int32_t> prefix(static_cast<size_t>(verified_));
    std::iota(prefix.begin(), prefix.end(), 0);
    chain = chain.subtree(prefix);
  }
  return verified_;
}

void ChainBudget::observe(int64_t accepted) {
  if (!pending_) return;  // this cycle drafted nothing (skipped, or no room): nothing to learn
  pending_ = false;
  ++observed_;
  skipping_.committed(std::min<int64_t>(accepted, verified_) + 1);
  for (int32_t k = 0; k < verified_; ++k)
    calibration_[static_cast<size_t>(k)].observe(values_[static_cast<size_t>(k)], accepted > k ? 1.0 : 0.0);
}

std::vector<OptionSpec> chain_budget_options(const std::string& depth, const std::string& max_option,
                                             int64_t default_max, const std::string& cap_meaning) {
  return {integer_option(max_option, default_max, cap_meaning.empty() ? 1 : 0, 1024,
                         depth + "=auto: the most tokens a cycle drafts" + (cap_meaning.empty() ? "" : " (0: " + cap_meaning + ")")),
          auto_cost_option(depth, "token")};
}

std::optional<ChainBudget> chain_budget_from(const LlamaModel& target, const std::string& strategy,
                                             const StrategyOptions& options, const std::string& depth,
                                             const std::string& max_option) {
  if (!automatic_budget(strategy, options, depth)) return std::nullopt;
  return ChainBudget(target, static_cast<int32_t>(options.get_int(max_option)),
                     parse_auto_cost(strategy, options.get_string("auto_cost")));
}

DraftTree chain_of_slots(const at::Tensor& logits, Sampler& sampler, ChainBudget* budget) {
  DraftTree tree;
  int32_t parent = -1;
  for (int64_t i = 0; i < logits.size(0); ++i) {
    parent = add_drafted_token(tree, logits[i], parent, sampler);
    if (budget && !budget->another(tree.node(parent))) break;
  }
  if (budget) budget->finish(tree, sampler.params().greedy());
  return tree;
}

}  // namespace draftlab
