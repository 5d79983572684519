// A loaded tokenizer is used a little before it counts as parsed: a vocabulary that loads but is inconsistent
// (an id past the table, a merge of unknown pieces, a bad byte token) fails here, where a real run would.
#pragma once

#include <algorithm>

#include "core/text/gguf_vocabulary.h"
#include "core/text/tokenizer.h"
#include "tests/fuzz/fuzz_input.h"

namespace draftlab::fuzz {

inline void exercise_tokenizer(const Tokenizer& tokenizer) {
  // ASCII, spaces, digits, a byte-fallback candidate, SentencePiece's "▁", control-token text, an emoji, bad UTF-8.
  const char* text = "Hello  world! 123 <0x41> \xe2\x96\x81 <s></s>\n\t\xf0\x9f\x98\x80 \xff\xc3";
  tokenizer.decode(tokenizer.encode(text, true));
  tokenizer.encode("", false);
  const int32_t n = std::min<int32_t>(tokenizer.vocab_size(), 512);
  for (int32_t id = 0; id < n; ++id) {
    tokenizer.piece(id);
    tokenizer.token_bytes(tokenizer.bos_id(), id);
  }
  expect_clean_failure([&] { tokenizer.gguf_vocabulary(); });  // refusing a vocabulary GGUF cannot spell is fine
}

}  // namespace draftlab::fuzz
