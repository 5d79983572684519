#include "core/training/chat_dataset.h"

#include "core/base/error.h"

namespace draftlab {

TextDataset load_chat_dataset(const std::string& path, const Tokenizer& tokenizer, ChatTemplate t,
                              int64_t validation_every) {
  std::vector<MaskedSequence> sequences;
  for (const ChatConversation& c : read_chat_jsonl(path)) {
    try {
      sequences.push_back(tokenize_chat(t, c.messages, tokenizer));
    } catch (const Error& e) {
      throw Error::at(path + ":" + std::to_string(c.line), e.what());
    }
  }
  return split_sequences(sequences, validation_every, /*masked=*/true, path);
}

}  // namespace draftlab
