// pld: prompt lookup decoding (Saxena 2023; Hugging Face transformers' prompt_lookup_num_tokens). No model:
// the draft is what followed the most recent earlier occurrence of the sequence's last n tokens.
// Options: prompt_lookup_strategy() in prompt_lookup.cpp.
#pragma once

#include <memory>

#include "strategies/registry.h"

namespace draftlab {

}  // namespace draftlab
