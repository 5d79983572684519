// GgufVocabulary's padding and key writing, and the default Tokenizer::gguf_vocabulary. Each tokenizer builds its
// own vocabulary beside its implementation (tokenizer_bpe_gguf.cpp, tokenizer_spm.cpp, tokenizer_llama2c.cpp).
#include "core/text/gguf_vocabulary.h"

#include "core/base/error.h"
#include "core/io/gguf_writer.h"
#include "core/text/tokenizer.h"
#include "core/text/tokenizer_internal.h"

namespace draftlab {

GgufVocabulary Tokenizer::gguf_vocabulary() const {
  throw Error("this tokenizer has no GGUF vocabulary form (only the tokenizers load_tokenizer() returns have one)");
}

void GgufVocabulary::pad_to(int64_t vocab_size) {
  if (static_cast<int64_t>(tokens.size()) > vocab_size)
    throw Error("GGUF vocabulary: the tokenizer has " + std::to_string(tokens.size()) +
                " tokens, more than the model's vocab_size " + std::to_string(vocab_size));
  while (static_cast<int64_t>(tokens.size()) < vocab_size) {
    tokens.push_back("[PAD" + std::to_string(tokens.size()) + "]");
    token_types.push_back(static_cast<int32_t>(PieceType::kUnused));
    if (model == "llama") scores.push_back(0.0f);
  }
}

void GgufVocabulary::write_to(GgufWriter& w) const {
  w.add_string("tokenizer.ggml.model", model);
  if (model == "gpt2") w.add_string("tokenizer.ggml.pre", pre);
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  if (model == "llama") w.add_array("tokenizer.ggml.scores", scores);
  w.add_array("tokenizer.ggml.token_type", token_types);
  if (model == "gpt2") w.add_string_array("tokenizer.ggml.merges", merges);
  // Token ids are uint32 in llama.cpp's converter.
  if (bos_id >= 0) w.add("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos_id));
  if (eos_id >= 0) w.add("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos_id));
  if (unk_id >= 0) w.add("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(unk_id));
  w.add("tokenizer.ggml.add_bos_token", bos_id >= 0);
  w.add("tokenizer.ggml.add_eos_token", false);
  if (model == "llama") {
    w.add("tokenizer.ggml.add_space_prefix", add_space_prefix);
    w.add("tokenizer.ggml.remove_extra_whitespaces", remove_extra_whitespaces);
  }
}

}  // namespace draftlab
