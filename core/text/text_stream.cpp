#include "core/text/text_stream.h"

namespace draftlab {
namespace {

const char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// For a UTF-8 lead byte: the sequence length and the allowed range of the second byte, which is what rules out
// overlong forms (E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and code points above U+10FFFF (F4 90..).
// Length 0 = a byte that cannot start a sequence.
struct LeadByte {
  int length;
  uint8_t second_min, second_max;
};

LeadByte classify(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};  // continuation byte without a lead, C0/C1 (overlong), F5..FF
}

}  // namespace

std::string TextStream::push(int32_t id) {
  pending_ += tokenizer_.token_bytes(prev_, id);
  prev_ = id;
  return drain(false);
}

std::string TextStream::finish() { return drain(true); }

std::string TextStream::drain(bool final) {
  std::string out;
  const size_t n = pending_.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t lead = static_cast<uint8_t>(pending_[i]);
    const LeadByte kind = classify(lead);
    if (kind.length == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    // Count how many of the following bytes continue this sequence validly.
    int valid = 1;
    while (valid < kind.length && i + valid < n) {
      const uint8_t b = static_cast<uint8_t>(pending_[i + valid]);
      const bool ok = valid == 1 ? (b >= kind.second_min && b <= kind.second_max) : (b >= 0x80 && b <= 0xBF);
      if (!ok) break;
      ++valid;
    }
    if (valid == kind.length) {
      out.append(pending_, i, valid);
      i += valid;
    } else if (i + valid == n && !final) {
      break;  // a valid start whose remaining bytes may come with the next token: hold it back
    } else {
      // The sequence was cut off by a byte that cannot continue it (or by the end of the stream):
      // its valid prefix becomes one U+FFFD, and the offending byte is looked at afresh.
      out += kReplacement;
      i += valid;
    }
  }
  pending_.erase(0, i);
  return out;
}

std::string decode_utf8(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  TextStream stream(tokenizer);
  std::string text;
  for (int32_t id : ids) text += stream.push(id);
  return text + stream.finish();
}

}  // namespace draftlab
