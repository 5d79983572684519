// TextStream - turns generated token ids into printable text one token at a time.
//
// A byte-fallback vocabulary can split one character over several tokens ("é" = <0xC3><0xA9>), so printing
// token_bytes() as they come would print broken UTF-8. push() returns only complete, valid UTF-8: it holds back
// the start of a multi-byte sequence until the rest arrives, and replaces bytes that can no longer form a valid
// sequence with U+FFFD (one per maximal invalid subpart, the Unicode-recommended practice). finish() flushes
// whatever is still held back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/text/tokenizer.h"

namespace draftlab {

class TextStream {
 public:
  explicit TextStream(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The text that token `id` completes (possibly empty). Passes the previous token to token_bytes, so the
  // leading space after BOS is dropped exactly as in Tokenizer::decode.
  std::string push(int32_t id);

  // Everything still held back; an unfinished multi-byte sequence becomes U+FFFD.
  std::string finish();

 private:
  // Moves the longest ready prefix of pending_ to the result. At the end of the stream (`final`), an incomplete
  // tail is not ready but invalid.
  std::string drain(bool final);

  const Tokenizer& tokenizer_;
  int32_t prev_ = -1;
  std::string pending_;  // bytes received but not yet returned: at most the first 3 bytes of one character
};

// The text of `ids` as valid UTF-8: Tokenizer::decode, with each broken sequence replaced by U+FFFD as TextStream
// does (what Python's bytes.decode(errors="replace") gives the papers' scripts). For text that is stored or fed
// back as a prompt: a fixed token budget can end inside a multi-byte character.
std::string decode_utf8(const Tokenizer& tokenizer, const std::vector<int32_t>& ids);

}  // namespace draftlab
