#include "core/decoding/speculative_decoder.h"

#include <algorithm>
#include <chrono>

#include "core/base/error.h"
#include "core/model/forward_clock.h"

namespace draftlab {

namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Rows the target cache gets beyond prompt + max_new_tokens: room for the last cycles' trees.
constexpr int64_t kTreeRoom = 512;

}  // namespace

int64_t speculative_cache_capacity(int64_t context, int64_t prompt_tokens, int64_t max_new_tokens) {
  return std::min(context, prompt_tokens + max_new_tokens + kTreeRoom);
}

double SpeculativeResult::tau() const {
  if (cycles.empty()) return 0.0;
  double total = 0.0;
  for (const auto& c : cycles) total += c.accepted + 1;
  return total / static_cast<double>(cycles.size());
}

double SpeculativeResult::draft_seconds() const {
  double s = 0.0;
  for (const auto& c : cycles) s += c.draft_seconds;
  return s;
}

double SpeculativeResult::verify_seconds() const {
  double s = 0.0;
  for (const auto& c : cycles) s += c.verify_seconds;
  return s;
}

double SpeculativeResult::forward_seconds() const {
  double s = 0.0;
  for (const auto& c : cycles) s += c.forward_seconds;
  return s;
}

double SpeculativeResult::overhead_per_cycle() const {
  if (cycles.empty()) return 0.0;
  return (draft_seconds() + verify_seconds() - forward_seconds()) / static_cast<double>(cycles.size());
}

SpeculativeDecoder::SpeculativeDecoder(const LlamaModel& target, DraftStrategy& strategy, RejectionUpdate on_rejection)
    : target_(target), strategy_(strategy), on_rejection_(on_rejection) {}

SpeculativeResult SpeculativeDecoder::generate(const std::vector<int64_t>& prompt, const GenerationConfig& config,
                                               const TokenCallback& on_token) {
  const int64_t context = generation_context(target_, config);
  check_prompt_fits(prompt, context);
  check(config.max_new_tokens >= 0, "max_new_tokens must be >= 0");

  SpeculativeResult result;
  result.stop_reason = "max_new_tokens";
  if (config.max_new_tokens == 0) return result;
  const int64_t P = static_cast<int64_t>(prompt.size());
  KvCache cache = target_.make_cache(speculative_cache_capacity(context, P, config.max_new_tokens));
  Sampler sampler(config.sampling, config.seed);
  const std::vector<int64_t> feature_layers = strategy_.target_feature_layers();
  Verifier verifier(target_, sampler, on_rejection_, feature_layers);

  // Emits a token unless it stops generation; returns false when generation is over.
  auto emit = [&](int64_t token) {
    if (std::find(config.stop_tokens.begin(), config.stop_tokens.end(), token) != config.stop_tokens.end()) {
      result.stop_reason = "stop_token";
      return false;
    }
    result.tokens.push_back(token);
    if (on_token) on_token(token);
    return static_cast<int64_t>(result.tokens.size()) < config.max_new_tokens;
  };

  // Prefill: the first token comes from the prompt's last logits, exactly as in vanilla decoding.
  auto t0 = Clock::now();
  // With a strategy's own rows after the prompt (DraftStrategy::prefill_rows): the logits of row P - 1 and theirs.
  const std::vector<int64_t> chain = prompt_with_prefill_rows(strategy_, prompt, cache.capacity() - P);
  const auto k = static_cast<int64_t>(chain.size()) - P;
  ForwardOptions prefill_options;
  prefill_options.logits = k > 0 ? ForwardOptions::Logits::Rows : ForwardOptions::Logits::Last;
  if (k > 0) prefill_options.rows = at::arange(P - 1, P + k, at::kLong);
  prefill_options.feature_layers = feature_layers;
  auto prefill = target_.forward_chain(cache, chain, prefill_options);
  if (k > 0) cache.truncate(P);
  result.forwards = 1;
  const int64_t first = sampler.sample(prefill.logits[0]);
  auto t1 = Clock::now();
  result.prefill_seconds = seconds(t0, t1);

  std::vector<int64_t> sequence = prompt;
  sequence.push_back(first);
  bool going = emit(first);
  if (going) {
    strategy_.begin(prompt, k > 0 ? prefill.features.narrow(0, 0, P) : prefill.features, first);
    if (k > 0) strategy_.observe_prefill_rows(prefill.logits.narrow(0, 1, k));
  }

  while (going) {
    if (cache.length() >= context) {  // the root cannot be fed: same bound as vanilla
      result.stop_reason = "context";
      break;
    }
    CycleStats stats;
    const int64_t room = cache.capacity() - cache.length() - 1;
    const int64_t wanted = config.max_new_tokens - static_cast<int64_t>(result.tokens.size());
    DraftRequest request{sequence, static_cast<int32_t>(std::min<int64_t>(room, INT32_MAX)),
                         static_cast<int32_t>(std::min<int64_t>(wanted, INT32_MAX)), sampler};
    const double forwards_before = ForwardClock::seconds();
    auto a = Clock::now();
    DraftTree tree = strategy_.propose(request);
    auto b = Clock::now();
    if (tree.size() + tree.extra_size() > room)
      throw Error("strategy " + strategy_.name() + " drafted " + std::to_string(tree.size()) + " nodes and " +
                  std::to_string(tree.extra_size()) + " extra rows, but only " + std::to_string(room) +
                  " fit the context");
    VerifyResult verified = verifier.verify(cache, sequence.back(), tree);
    auto c = Clock::now();
    strategy_.observe(verified);
    auto d = Clock::now();
    stats.forward_seconds = ForwardClock::seconds() - forwards_before;
    ++result.forwards;

    stats.drafted = tree.size();
    stats.experts_read = static_cast<int32_t>(verified.experts_read);
    stats.accepted = static_cast<int32_t>(verified.accepted_nodes.size());
    stats.rejected = verified.rejections;
    stats.draft_seconds = seconds(a, b) + seconds(c, d);
    stats.verify_seconds = seconds(b, c);
    for (const auto& r : verified.records) {
      result.records.push_back(r);
      result.record_cycle.push_back(static_cast<int32_t>(result.cycles.size()));
    }
    result.cycles.push_back(stats);

    for (int64_t token : verified.tokens) {
      sequence.push_back(token);
      if (!(going = emit(token))) break;
    }
  }
  result.decode_seconds = seconds(t1, Clock::now());
  return result;
}

}  // namespace draftlab
