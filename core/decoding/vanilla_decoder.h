// The plain autoregressive loop: one target forward per token. It is the reference every speculative
// strategy must reproduce (identical tokens at T = 0, identical distribution at T > 0).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/model/llama_model.h"
#include "core/model/sampler.h"

namespace draftlab {

struct GenerationConfig {
  int64_t max_new_tokens = 128;
  SamplingParams sampling;
  uint64_t seed = 0;
  std::vector<int64_t> stop_tokens;  // sampling one of these ends generation; it is not emitted
  int64_t context_limit = 0;         // 0: the model's max_position_embeddings
};

// The checks that need no model (commands run them before loading one; the decoders again): sampling parameters,
// max_new_tokens >= 0, context_limit >= 0. Throws Error naming the field (as its command-line flag).
void check_generation_config(const GenerationConfig& config);

struct GenerationResult {
  std::vector<int64_t> tokens;  // generated tokens only (a stop token is not included)
  std::string stop_reason;      // "stop_token", "max_new_tokens" or "context"
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;  // everything after the prefill
  int64_t forwards = 0;         // target forward calls, prefill included

  double tokens_per_second() const {
    return decode_seconds > 0 ? static_cast<double>(tokens.size()) / decode_seconds : 0.0;
  }
};

// Called with each token as soon as it is chosen (for streaming output).
using TokenCallback = std::function<void(int64_t token)>;

// Throws Error for an empty prompt or a prompt that does not fit the context.
// The number of tokens a context of C positions can produce from a prompt of P tokens is C - P + 1
// (the last generated token is never fed back), the same bound llama2.c's run.c has with steps = C.
GenerationResult generate_vanilla(const LlamaModel& model, const std::vector<int64_t>& prompt,
                                  const GenerationConfig& config, const TokenCallback& on_token = {});

// The context a generation may use: config.context_limit if set (never past the model's), else the model's.
int64_t generation_context(const LlamaModel& model, const GenerationConfig& config);

// Checks a prompt against the context; throws Error "prompt has N tokens, the context holds C ...".
void check_prompt_fits(const std::vector<int64_t>& prompt, int64_t context);

}  // namespace draftlab
