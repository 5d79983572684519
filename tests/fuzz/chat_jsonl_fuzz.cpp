// Chat JSONL for head training (core/text/chat_jsonl.h, torch-free): parse_chat_jsonl (read_chat_jsonl's parser,
// on the text), then each conversation as load_chat_dataset uses it: assistant_spans under every template and
// tokenize_chat with ts-tiny's byte-level BPE tokenizer, one template per conversation in turn (encoding is the slow
// part). The spans must lie in order inside the rendering, and the mask must have one entry per token.
#include "core/text/chat_jsonl.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  static const std::unique_ptr<Tokenizer> tokenizer =
      load_hf_tokenizer_json(DRAFTLAB_SOURCE_DIR "/data/models/ts-tiny/tokenizer.json");
  static const ChatTemplate templates[] = {ChatTemplate::Plain, ChatTemplate::VicunaV11, ChatTemplate::Llama2Chat,
                                           ChatTemplate::Llama3Instruct};
  std::vector<ChatConversation> conversations;
  fuzz::expect_clean_failure(
      [&] { conversations = parse_chat_jsonl(std::string(reinterpret_cast<const char*>(data), size), "chat.jsonl"); });
  for (const ChatConversation& c : conversations)
    fuzz::expect_clean_failure([&] {  // a conversation whose roles do not alternate fails here, as in training
      for (ChatTemplate t : templates) {
        const size_t rendered = render_chat(t, c.messages, false).size();
        size_t last = 0;
        for (const auto& [start, end] : assistant_spans(t, c.messages)) {
          if (start < last || end < start || end > rendered) std::abort();
          last = end;
        }
      }
      const MaskedSequence s = tokenize_chat(templates[c.line % 4], c.messages, *tokenizer);
      if (s.mask.size() != s.tokens.size()) std::abort();
    });
  return 0;
}
