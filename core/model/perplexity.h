// Perplexity of a model on a token sequence, through the inference forward (independent of the training code,
// so it can check a trained model's recorded numbers).
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/llama_model.h"

namespace draftlab {

struct PerplexityResult {
  double mean_nll = 0.0;  // nats per predicted token
  double perplexity = 0.0;
  int64_t predicted_tokens = 0;
};

// Splits `tokens` into consecutive windows of `context` tokens (the last may be shorter), runs each from an empty
// cache and scores every next-token prediction inside the window. Throws Error if fewer than 2 tokens.
PerplexityResult perplexity(const LlamaModel& model, const std::vector<int64_t>& tokens, int64_t context);

}  // namespace draftlab
