// pld: prompt lookup decoding (Saxena 2023; Hugging Face transformers' prompt_lookup_num_tokens). No model:
// the draft is what followed the most recent earlier occurrence of the sequence's last n tokens.
// Options: max_ngram=3, min_ngram=1, num_tokens=10.
#pragma once

#include <memory>

#include "strategies/registry.h"

namespace draftlab {

std::unique_ptr<DraftStrategy> make_prompt_lookup_strategy(const StrategyContext& context,
                                                           const StrategyOptions& options);

}  // namespace draftlab
