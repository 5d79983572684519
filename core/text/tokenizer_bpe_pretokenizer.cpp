// The BPE pre-tokenizer's building blocks: GPT-2's byte-level alphabet (bytes <-> printable symbols) and the
// GPT-2 / Llama-3 split regexes, implemented by hand; also the byte_level.h entry points the BPE trainer uses.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/text/byte_level.h"
#include "core/text/tokenizer_bpe_internal.h"
#include "core/text/unicode_categories.h"

namespace draftlab {
namespace {

// ================================================================================================
// UTF-8 helpers
// ================================================================================================

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// ================================================================================================
// GPT-2's byte-level alphabet
// ================================================================================================

// GPT-2's bytes_to_unicode(): every byte gets a printable codepoint, so that BPE pieces are readable strings
// without spaces or control characters. Printable Latin-1 bytes stand for themselves; the other 68 bytes take
// codepoints 256, 257, ... in byte order (space -> U+0120 "Ġ", newline -> U+010A "Ċ").
class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& get() {
    static const ByteLevelAlphabet alphabet;
    return alphabet;
  }

  const std::string& symbol(uint8_t byte) const { return symbols_[byte]; }

  // The byte a symbol codepoint stands for, or -1 if the codepoint is not in the alphabet.
  int byte_of(char32_t cp) const { return cp < bytes_.size() ? bytes_[cp] : -1; }

 private:
  static constexpr size_t kLastCodepoint = 256 + 67;  // 68 remapped bytes

  ByteLevelAlphabet() {
    bytes_.fill(-1);
    char32_t next_remapped = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next_remapped++;
      append_utf8(symbols_[b], cp);
      bytes_[cp] = static_cast<int16_t>(b);
    }
  }

  std::array<std::string, 256> symbols_;
  std::array<int16_t, kLastCodepoint + 1> bytes_;
};

}  // namespace

std::string to_byte_level_symbols(std::string_view text) {
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) out += alphabet.symbol(static_cast<uint8_t>(c));
  return out;
}

// Inverse of to_byte_level_symbols. Characters outside the alphabet are kept as they are (as Hugging Face's
// ByteLevel decoder does), so a piece that was never byte-level encoded survives.
std::string from_byte_level_symbols(std::string_view symbols) {
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  std::string out;
  for (size_t pos = 0; pos < symbols.size();) {
    const unicode::DecodedChar ch = unicode::decode_utf8(symbols, pos);
    const int byte = ch.codepoint == unicode::kInvalidCodepoint ? -1 : alphabet.byte_of(ch.codepoint);
    if (byte >= 0) {
      out += static_cast<char>(byte);
    } else {
      out.append(symbols.substr(pos, ch.length));
    }
    pos += ch.length;
  }
  return out;
}

// ================================================================================================
// Pre-tokenizer split patterns (the regexes, implemented by hand)
// ================================================================================================

namespace {

// Text decoded once into codepoints, with each one's byte offset (offsets has one extra entry: the end).
struct Codepoints {
  explicit Codepoints(std::string_view text) {
    for (size_t pos = 0; pos < text.size();) {
      const unicode::DecodedChar ch = unicode::decode_utf8(text, pos);
      cps.push_back(ch.codepoint);
      offsets.push_back(pos);
      pos += ch.length;
    }
    offsets.push_back(text.size());
  }
  size_t size() const { return cps.size(); }

  // Character classes of the regexes; past-the-end reads as "no character", matching nothing.
  bool letter(size_t i) const { return i < size() && unicode::is_letter(cps[i]); }
  bool number(size_t i) const { return i < size() && unicode::is_number(cps[i]); }
  bool space(size_t i) const { return i < size() && unicode::is_whitespace(cps[i]); }
  // [^\s\p{L}\p{N}]: punctuation, symbols, marks, controls, and bytes that are not valid UTF-8.
  bool other(size_t i) const { return i < size() && !space(i) && !letter(i) && !number(i); }
  bool is(size_t i, char32_t c) const { return i < size() && cps[i] == c; }
  bool newline(size_t i) const { return is(i, '\r') || is(i, '\n'); }
  // Case folding for the (?i:...) contractions: A-Z and U+017F (long s, which folds to 's').
  char32_t fold_case(size_t i) const {
    if (i >= size()) return 0;
    const char32_t c = cps[i];
    if (c == 0x17F) return 's';
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
  }

  std::vector<char32_t> cps;
  std::vector<size_t> offsets;
};

// End of the run of characters satisfying `in_class`, starting at i.
template <typename Pred>
size_t run_end(size_t i, size_t n, Pred in_class) {
  while (i < n && in_class(i)) ++i;
  return i;
}

// The two whitespace alternatives both regexes end with: \s+(?!\S)|\s+ at a whitespace character i.
// A run followed by a word keeps its last space for that word (" world"); a run at the end is taken whole.
size_t trailing_whitespace_match(const Codepoints& t, size_t i) {
  const size_t end = run_end(i, t.size(), [&](size_t k) { return t.space(k); });
  if (end == t.size() || end - i == 1) return end;
  return end - 1;
}

// End of the GPT-2 regex match starting at i:
//   's|'t|'re|'ve|'m|'ll|'d | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
size_t gpt2_match_end(const Codepoints& t, size_t i) {
  const size_t n = t.size();
  if (t.is(i, '\'')) {
    const char32_t c1 = i + 1 < n ? t.cps[i + 1] : 0, c2 = i + 2 < n ? t.cps[i + 2] : 0;
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return i + 3;
  }
  // The optional leading space belongs to the word after it.
  const size_t start = t.is(i, ' ') ? i + 1 : i;
  if (t.letter(start)) return run_end(start, n, [&](size_t k) { return t.letter(k); });
  if (t.number(start)) return run_end(start, n, [&](size_t k) { return t.number(k); });
  if (t.other(start)) return run_end(start, n, [&](size_t k) { return t.other(k); });
  return trailing_whitespace_match(t, i);
}

// End of the Llama-3 regex match starting at i:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n]*
//   | \s*[\r\n]+ | \s+(?!\S) | \s+
size_t llama3_match_end(const Codepoints& t, size_t i) {
  const size_t n = t.size();
  if (t.is(i, '\'')) {
    const char32_t c1 = t.fold_case(i + 1), c2 = t.fold_case(i + 2);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return i + 3;
  }
  // A word may take one leading non-letter, non-digit, non-newline character (" hello", "(hello", "\thello").
  if (t.letter(i)) return run_end(i, n, [&](size_t k) { return t.letter(k); });
  if (!t.newline(i) && !t.number(i) && t.letter(i + 1)) return run_end(i + 1, n, [&](size_t k) { return t.letter(k); });
  // Numbers in groups of at most three digits.
  if (t.number(i)) return std::min(run_end(i, n, [&](size_t k) { return t.number(k); }), i + 3);
  const size_t start = t.is(i, ' ') ? i + 1 : i;
  if (t.other(start)) {
    const size_t end = run_end(start, n, [&](size_t k) { return t.other(k); });
    return run_end(end, n, [&](size_t k) { return t.newline(k); });
  }
  // \s*[\r\n]+ : whitespace up to and including the run's last newline.
  const size_t end = run_end(i, n, [&](size_t k) { return t.space(k); });
  for (size_t k = end; k > i; --k) {
    if (t.newline(k - 1)) return k;
  }
  return trailing_whitespace_match(t, i);
}

}  // namespace

std::vector<std::string> split_by_pattern(std::string_view text, SplitPattern pattern) {
  const Codepoints t(text);
  std::vector<std::string> pieces;
  for (size_t i = 0; i < t.size();) {
    const size_t end = pattern == SplitPattern::kGpt2 ? gpt2_match_end(t, i) : llama3_match_end(t, i);
    pieces.emplace_back(text.substr(t.offsets[i], t.offsets[end] - t.offsets[i]));
    i = end;
  }
  return pieces;
}

// The byte_level.h entry points (for the BPE trainer): the functions above, under public names.
namespace byte_level {
const std::string& symbol(uint8_t byte) { return ByteLevelAlphabet::get().symbol(byte); }
std::string to_symbols(std::string_view bytes) { return to_byte_level_symbols(bytes); }
std::vector<std::string> split_gpt2(std::string_view text) { return split_by_pattern(text, SplitPattern::kGpt2); }
}  // namespace byte_level

}  // namespace draftlab
