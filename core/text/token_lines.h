// Token-line files: one sequence per line as decimal token ids (`draftlab gen-head-data` writes them, `train-head
// --data-format tokens` reads them):
//   "1 417 92 | 35 88 2"   the ids before "|" (the prompt) get loss mask 0, those after it 1;
//   "1 417 92 35 88 2"     a line without "|" is all 1.
// Ids are taken as they are (BOS included when the line has it): no retokenization drift. The data has a loss mask
// when any line has a "|". Blank lines are skipped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/text/masked_sequence.h"

namespace draftlab {

// Reads a token-line file; every id must be in [0, vocab_size). Throws Error "FILE:LINE: ..." naming the token.
std::vector<MaskedSequence> read_token_lines(const std::string& path, int64_t vocab_size, bool* any_mask = nullptr);
// One line of that format (without the newline).
std::string format_token_line(const std::vector<int64_t>& prompt, const std::vector<int64_t>& continuation);

}  // namespace draftlab
