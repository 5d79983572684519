#include "core/decoding/vanilla_decoder.h"

#include <algorithm>
#include <chrono>

#include "core/base/error.h"

namespace draftlab {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

void check_prompt_fits(const std::vector<int64_t>& prompt, int64_t context) {
  if (prompt.empty()) throw Error("empty prompt: at least one token is needed (a tokenizer with BOS gives one)");
  if (static_cast<int64_t>(prompt.size()) > context)
    throw Error("prompt has " + std::to_string(prompt.size()) + " tokens, the context holds " +
                std::to_string(context) + " (max_position_embeddings); shorten the prompt");
}

void check_generation_config(const GenerationConfig& config) {
  config.sampling.validate();
  check(config.max_new_tokens >= 0,
        [&] { return "--max-new-tokens: expected >= 0, got " + std::to_string(config.max_new_tokens); });
  check(config.context_limit >= 0, [&] {
    return "--context: expected 0 (the model's context) or a positive number, got " +
           std::to_string(config.context_limit);
  });
}

int64_t generation_context(const LlamaModel& model, const GenerationConfig& config) {
  const int64_t max_ctx = model.config().max_position_embeddings;
  return config.context_limit > 0 ? std::min(config.context_limit, max_ctx) : max_ctx;
}

GenerationResult generate_vanilla(const LlamaModel& model, const std::vector<int64_t>& prompt,
                                  const GenerationConfig& config, const TokenCallback& on_token) {
  const int64_t context = generation_context(model, config);
  check_prompt_fits(prompt, context);
  check_generation_config(config);

  GenerationResult result;
  result.stop_reason = "max_new_tokens";
  if (config.max_new_tokens == 0) return result;
  const int64_t P = static_cast<int64_t>(prompt.size());
  KvCache cache = model.make_cache(std::min(context, P + config.max_new_tokens));
  Sampler sampler(config.sampling, config.seed);
  ForwardOptions last_only;
  last_only.logits = ForwardOptions::Logits::Last;

  auto t0 = std::chrono::steady_clock::now();
  auto out = model.forward_chain(cache, prompt, last_only);
  result.forwards = 1;
  int64_t next = sampler.sample(out.logits[0]);
  result.prefill_seconds = seconds_since(t0);

  auto t1 = std::chrono::steady_clock::now();
  while (true) {
    if (std::find(config.stop_tokens.begin(), config.stop_tokens.end(), next) != config.stop_tokens.end()) {
      result.stop_reason = "stop_token";
      break;
    }
    result.tokens.push_back(next);
    if (on_token) on_token(next);
    if (static_cast<int64_t>(result.tokens.size()) >= config.max_new_tokens) break;
    if (cache.length() >= context) {
      result.stop_reason = "context";
      break;
    }
    out = model.forward_chain(cache, {next}, last_only);
    ++result.forwards;
    next = sampler.sample(out.logits[0]);
  }
  result.decode_seconds = seconds_since(t1);
  return result;
}

}  // namespace draftlab
