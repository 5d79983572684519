// One tokenized sequence (a story, a conversation, a prompt and its continuation) with its 0/1 loss mask.
#pragma once

#include <cstdint>
#include <vector>

namespace draftlab {

struct MaskedSequence {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;  // one entry per token
};

}  // namespace draftlab
