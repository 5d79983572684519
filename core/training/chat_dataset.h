// Chat training data for draft heads as a TextDataset: the conversations of core/text/chat_jsonl.h (format, roles,
// which tokens are the assistant's), tokenized with their loss masks and split like a corpus.
#pragma once

#include <cstdint>
#include <string>

#include "core/text/chat_jsonl.h"
#include "core/training/text_dataset.h"

namespace draftlab {

// read_chat_jsonl + tokenize_chat for each conversation, split like a corpus (every validation_every-th
// conversation to validation), with the loss mask. Errors name the file and line.
TextDataset load_chat_dataset(const std::string& path, const Tokenizer& tokenizer, ChatTemplate t,
                              int64_t validation_every);

}  // namespace draftlab
