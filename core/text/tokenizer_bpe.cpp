// Ranked-merge BPE: GPT-2 style byte-level vocabularies (GGUF "gpt2") and Hugging Face tokenizer.json files
// whose model is BPE (GPT-2, Llama-3, and Llama-2's Metaspace / byte-fallback flavour).
//
// One engine, BpeTokenizer, encodes text in the stages Hugging Face tokenizers uses, each configured by the
// vocabulary's file:
//   1. added tokens   cut out of the text verbatim ("<|endoftext|>", "<s>"); the rest is encoded in segments
//   2. normalizer     string rewrites of each segment (Llama-2: prepend "▁", spaces -> "▁")
//   3. pre-tokenizer  split a segment into words (GPT-2 / Llama-3 regex, implemented by hand), map bytes to
//                     GPT-2's printable symbols (ByteLevel), or handle "▁" (Metaspace)
//   4. BPE model      each word starts as its characters (an unknown one becomes <0xXX> byte tokens or <unk>);
//                     the adjacent pair with the lowest merge rank merges, leftmost first, until none is left
// and turns ids back into bytes through a decoder config (GPT-2 symbols -> bytes, "▁" -> " ", "<0xXX>" -> byte).
//
// The front-ends at the end of the file fill a BpeSpec from a GGUF file or a tokenizer.json.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/gguf.h"
#include "core/text/byte_level.h"
#include "core/text/gguf_vocabulary.h"
#include "core/text/tokenizer.h"
#include "core/text/tokenizer_internal.h"
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

// Replaces every occurrence of `pattern` (non-empty) in `text` with `content`.
std::string replace_all(std::string_view text, std::string_view pattern, std::string_view content) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(pattern, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos)).append(content);
    pos = hit + pattern.size();
  }
  out.append(text.substr(pos));
  return out;
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

// The two split regexes in use, spelled exactly as tokenizer.json files store them.
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

enum class SplitPattern { kGpt2, kLlama3 };

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

// Splits text into the consecutive matches of the pattern. Every character falls in some alternative of both
// regexes, so the pieces cover the text exactly.
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

// ================================================================================================
// Pipeline configuration
// ================================================================================================

// A normalizer step, applied to each segment of text between added tokens.
struct NormalizerStep {
  enum class Kind { kPrepend, kReplace } kind;
  std::string pattern;  // kReplace: the literal string to replace
  std::string content;  // kPrepend: the prefix; kReplace: the replacement
};

enum class PrependScheme { kAlways, kFirst, kNever };

// A pre-tokenizer step: turns each word into one or more words.
struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kMetaspace } kind;
  SplitPattern pattern = SplitPattern::kGpt2;  // kSplit, and kByteLevel when use_regex
  bool use_regex = true;                       // kByteLevel: split with the GPT-2 regex first
  bool add_prefix_space = false;               // kByteLevel: " " before a word that does not start with one
  std::string replacement = "\xE2\x96\x81";    // kMetaspace: "▁" stands for a space
  PrependScheme prepend_scheme = PrependScheme::kAlways;  // kMetaspace: where a leading "▁" is added
  bool split = true;                           // kMetaspace: each "▁" starts a new word
};

// How a token id turns back into bytes.
struct DecoderSpec {
  bool byte_level = false;                                       // GPT-2 symbols back to bytes
  bool byte_fallback = false;                                    // "<0xXX>" is that byte
  std::vector<std::pair<std::string, std::string>> replacements;  // e.g. "▁" -> " ", in order
  // SentencePiece's dummy prefix: the space that starts the first piece after BOS is not part of the text.
  bool strip_space_after_bos = false;
};

// What a token id is, for decoding.
enum class TokenRole : uint8_t {
  kModel,     // a piece of the BPE vocabulary: decoded through the DecoderSpec
  kSpecial,   // control token (BOS, EOS, <|eot_id|>, <unk>): no bytes in the output
  kVerbatim,  // non-special added / user-defined token: its text as is
  kUnused,    // an id no entry of the file uses
};

// A token matched verbatim in the input before anything else happens.
struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool lstrip = false;       // the match also takes whitespace before it
  bool rstrip = false;       // ... and after it
  bool single_word = false;  // only matches when not inside a word
};

// Everything a front-end reads from its file.
struct BpeSpec {
  std::string source;  // the file, named in errors

  std::vector<std::string> pieces;  // by id
  std::vector<TokenRole> roles;     // by id
  std::vector<bool> in_model;       // by id: the piece is in the BPE model's vocabulary
  std::string vocab_field;          // "model.vocab" / "tokenizer.ggml.tokens", for errors
  std::string merges_field;         // "model.merges" / "tokenizer.ggml.merges", for errors
  std::vector<std::pair<std::string, std::string>> merges;  // by rank, best first

  std::vector<AddedToken> added_tokens;
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  DecoderSpec decoder;

  bool byte_fallback = false;  // characters not in the vocabulary become <0xXX> byte tokens
  bool fuse_unk = false;       // consecutive unknown characters give one <unk>
  bool ignore_merges = false;  // a word that is itself a piece is not split (Llama-3)
  int32_t unk_id = -1;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
};

// ================================================================================================
// The tokenizer
// ================================================================================================

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeSpec spec);

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
  std::string token_bytes(int32_t prev, int32_t id) const override;
  const std::string& piece(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(spec_.pieces.size()); }
  int32_t bos_id() const override { return spec_.bos_id; }
  int32_t eos_id() const override { return spec_.eos_id; }
  GgufVocabulary gguf_vocabulary() const override;

 private:
  struct MergeRule {
    int32_t rank;
    int32_t result;  // id of the merged piece
  };
  struct Word {
    std::string text;
    bool at_input_start;  // begins at offset 0 of the encoded text (Metaspace's "first" prepend scheme)
  };

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void check_id(int32_t id) const;
  void resolve_merges();
  void encode_segment(std::string_view segment, bool at_input_start, std::vector<int32_t>& ids) const;
  std::vector<Word> pre_tokenize(std::string text, bool at_input_start) const;
  void encode_word(const std::string& word, std::vector<int32_t>& ids) const;
  std::vector<int32_t> bpe(const std::string& word) const;
  // The longest added token matching at text[pos] (honouring single_word), or nullptr.
  const AddedToken* added_token_at(std::string_view text, size_t pos) const;

  BpeSpec spec_;
  std::unordered_map<std::string, int32_t> model_ids_;  // the BPE model's vocabulary: piece -> id
  std::unordered_map<uint64_t, MergeRule> merges_;      // (left id, right id) -> rule
  std::array<int32_t, 256> byte_ids_{};                 // id of "<0xXX>" per byte, -1 if absent
  std::array<std::vector<const AddedToken*>, 256> added_by_first_byte_;  // longest first

  // Most words recur (" the", " of"): their BPE result is kept. Guarded because encode() is const and may be
  // called from several threads.
  static constexpr size_t kMaxCachedWordBytes = 64;
  static constexpr size_t kMaxCacheEntries = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

BpeTokenizer::BpeTokenizer(BpeSpec spec) : spec_(std::move(spec)) {
  const size_t n = spec_.pieces.size();
  check(spec_.roles.size() == n && spec_.in_model.size() == n, "BpeTokenizer: inconsistent spec");
  for (size_t id = 0; id < n; ++id) {
    // The first id of a duplicated piece wins, as the merge list can only name it once.
    if (spec_.in_model[id]) model_ids_.emplace(spec_.pieces[id], static_cast<int32_t>(id));
  }
  resolve_merges();

  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    const auto it = model_ids_.find(name);
    byte_ids_[b] = it == model_ids_.end() ? -1 : it->second;
  }

  const bool byte_level = std::any_of(spec_.pre_tokenizer.begin(), spec_.pre_tokenizer.end(),
                                      [](const PreTokenizerStep& s) { return s.kind == PreTokenizerStep::Kind::kByteLevel; });
  if (byte_level) {
    // Every byte must be encodable, or some text could not be tokenized at all.
    for (int b = 0; b < 256; ++b) {
      const std::string& symbol = ByteLevelAlphabet::get().symbol(static_cast<uint8_t>(b));
      if (!model_ids_.count(symbol)) {
        char got[64];
        std::snprintf(got, sizeof(got), "no piece \"%s\" for byte 0x%02X", symbol.c_str(), b);
        throw Error::in_file(spec_.source, spec_.vocab_field, "all 256 byte-level symbols (ByteLevel BPE)", got);
      }
    }
  }

  for (const AddedToken& token : spec_.added_tokens) {
    added_by_first_byte_[static_cast<uint8_t>(token.content[0])].push_back(&token);
  }
  for (auto& candidates : added_by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const AddedToken* a, const AddedToken* b) { return a->content.size() > b->content.size(); });
  }
}

void BpeTokenizer::resolve_merges() {
  merges_.reserve(spec_.merges.size());
  for (size_t rank = 0; rank < spec_.merges.size(); ++rank) {
    // Named references, not a structured binding: lambdas may not capture those before C++20 (clang refuses).
    const std::string& left = spec_.merges[rank].first;
    const std::string& right = spec_.merges[rank].second;
    const std::string field = spec_.merges_field + "[" + std::to_string(rank) + "]";
    const auto lookup = [&](const std::string& piece) {
      const auto it = model_ids_.find(piece);
      if (it == model_ids_.end()) {
        throw Error::in_file(spec_.source, field, "a merge of two pieces of the vocabulary into a third",
                             "\"" + left + " " + right + "\" (\"" + piece + "\" is not in the vocabulary)");
      }
      return it->second;
    };
    const int32_t left_id = lookup(left), right_id = lookup(right), result = lookup(left + right);
    // A repeated pair keeps its first (best) rank, as llama.cpp does.
    merges_.emplace(pair_key(left_id, right_id), MergeRule{static_cast<int32_t>(rank), result});
  }
}

void BpeTokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw Error::in_file(spec_.source, "token id", "0 <= id < " + std::to_string(vocab_size()), std::to_string(id));
  }
}

const std::string& BpeTokenizer::piece(int32_t id) const {
  check_id(id);
  return spec_.pieces[id];
}

std::string BpeTokenizer::token_bytes(int32_t prev, int32_t id) const {
  check_id(id);
  switch (spec_.roles[id]) {
    case TokenRole::kSpecial:
    case TokenRole::kUnused:
      return "";
    case TokenRole::kVerbatim:
      return spec_.pieces[id];
    case TokenRole::kModel:
      break;
  }
  const DecoderSpec& decoder = spec_.decoder;
  const std::string& piece = spec_.pieces[id];
  if (decoder.byte_fallback) {
    const int byte = parse_byte_piece(piece);
    if (byte >= 0) return std::string(1, static_cast<char>(byte));
  }
  std::string text = decoder.byte_level ? from_byte_level_symbols(piece) : piece;
  for (const auto& [pattern, content] : decoder.replacements) text = replace_all(text, pattern, content);
  if (decoder.strip_space_after_bos && prev >= 0 && prev == spec_.bos_id && !text.empty() && text[0] == ' ') {
    text.erase(0, 1);
  }
  return text;
}

// The pre-tokenizer name llama.cpp gives the same split as this tokenizer's, or an Error. llama.cpp's "gpt-2"
// runs the GPT-2 regex by hand (unicode_regex_split_custom_gpt2), alternatives in the order of HF's ByteLevel
// regex including the final \s+; "llama-bpe" runs the Llama-3 regex with ignore_merges. Every other name adds
// or drops something (digit grouping, CJK ranges, other punctuation runs), so only these two match exactly.
std::string gguf_pre_tokenizer(const BpeSpec& spec) {
  using Kind = PreTokenizerStep::Kind;
  const auto& steps = spec.pre_tokenizer;
  const bool plain = spec.normalizer.empty() && !spec.byte_fallback && spec.decoder.byte_level;
  const auto byte_level = [](const PreTokenizerStep& s, bool use_regex) {
    return s.kind == Kind::kByteLevel && s.use_regex == use_regex && !s.add_prefix_space;
  };
  if (plain && steps.size() == 1 && byte_level(steps[0], true) && !spec.ignore_merges) return "gpt-2";
  if (plain && steps.size() == 2 && steps[0].kind == Kind::kSplit && steps[0].pattern == SplitPattern::kLlama3 &&
      byte_level(steps[1], false) && spec.ignore_merges)
    return "llama-bpe";
  throw Error::in_file(spec.source, "pre_tokenizer",
                       "a byte-level BPE that llama.cpp's \"gpt-2\" or \"llama-bpe\" pre-tokenizer reproduces exactly "
                       "(ByteLevel with the GPT-2 regex and no prefix space, or the Llama-3 Split + ByteLevel with "
                       "ignore_merges; no normalizer, no byte fallback)",
                       "another configuration (a Metaspace tokenizer.json: export its tokenizer.model instead)");
}

GgufVocabulary BpeTokenizer::gguf_vocabulary() const {
  GgufVocabulary v;
  v.model = "gpt2";
  v.pre = gguf_pre_tokenizer(spec_);
  const size_t n = spec_.pieces.size();
  v.tokens.reserve(n);
  v.token_types.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    PieceType type = PieceType::kNormal;
    switch (spec_.roles[id]) {
      case TokenRole::kModel: type = PieceType::kNormal; break;
      case TokenRole::kSpecial:
        type = static_cast<int32_t>(id) == spec_.unk_id ? PieceType::kUnknown : PieceType::kControl;
        break;
      case TokenRole::kVerbatim: type = PieceType::kUserDefined; break;
      case TokenRole::kUnused: type = PieceType::kUnused; break;
    }
    v.tokens.push_back(type == PieceType::kUnused ? "[PAD" + std::to_string(id) + "]" : spec_.pieces[id]);
    v.token_types.push_back(static_cast<int32_t>(type));
  }
  // Added tokens are cut out of the text verbatim before BPE; in GGUF that is what control and user-defined
  // types mean, so a non-special added token that is also a model piece becomes user-defined.
  for (const AddedToken& token : spec_.added_tokens)
    if (v.token_types[token.id] == static_cast<int32_t>(PieceType::kNormal))
      v.token_types[token.id] = static_cast<int32_t>(PieceType::kUserDefined);
  v.merges.reserve(spec_.merges.size());
  for (const auto& [left, right] : spec_.merges) v.merges.push_back(left + " " + right);
  v.bos_id = spec_.bos_id;
  v.eos_id = spec_.eos_id;
  v.unk_id = spec_.unk_id;
  return v;
}

const AddedToken* BpeTokenizer::added_token_at(std::string_view text, size_t pos) const {
  for (const AddedToken* token : added_by_first_byte_[static_cast<uint8_t>(text[pos])]) {
    if (text.compare(pos, token->content.size(), token->content) != 0) continue;
    if (token->single_word) {
      // Only as a word of its own: no letter, digit or '_' glued to either side.
      const auto word_char = [&](size_t at) {
        const char32_t cp = unicode::decode_utf8(text, at).codepoint;
        return unicode::is_letter(cp) || unicode::is_number(cp) || cp == '_';
      };
      const size_t end = pos + token->content.size();
      if (end < text.size() && word_char(end)) continue;
      if (pos > 0) {
        size_t previous = pos - 1;  // back to the first byte of the preceding character
        while (previous > 0 && (static_cast<uint8_t>(text[previous]) & 0xC0) == 0x80) --previous;
        if (word_char(previous)) continue;
      }
    }
    return token;
  }
  return nullptr;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> ids;
  if (add_bos && spec_.bos_id >= 0) ids.push_back(spec_.bos_id);

  // Cut added tokens out first (leftmost, longest match), then encode the segments between them.
  size_t segment_start = 0;
  const auto is_space = [&](size_t at) { return at < text.size() && std::isspace(static_cast<unsigned char>(text[at])); };
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken* token = added_token_at(text, pos);
    if (!token) {
      ++pos;
      continue;
    }
    size_t segment_end = pos;
    if (token->lstrip) {
      while (segment_end > segment_start && is_space(segment_end - 1)) --segment_end;
    }
    encode_segment(text.substr(segment_start, segment_end - segment_start), segment_start == 0, ids);
    ids.push_back(token->id);
    pos += token->content.size();
    if (token->rstrip) {
      while (is_space(pos)) ++pos;
    }
    segment_start = pos;
  }
  encode_segment(text.substr(segment_start), segment_start == 0, ids);
  return ids;
}

void BpeTokenizer::encode_segment(std::string_view segment, bool at_input_start, std::vector<int32_t>& ids) const {
  if (segment.empty()) return;
  std::string text(segment);
  for (const NormalizerStep& step : spec_.normalizer) {
    if (step.kind == NormalizerStep::Kind::kPrepend) {
      text.insert(0, step.content);  // the segment is never empty here
    } else {
      text = replace_all(text, step.pattern, step.content);
    }
  }
  for (const Word& word : pre_tokenize(std::move(text), at_input_start)) encode_word(word.text, ids);
}

std::vector<BpeTokenizer::Word> BpeTokenizer::pre_tokenize(std::string text, bool at_input_start) const {
  std::vector<Word> words{{std::move(text), at_input_start}};
  for (const PreTokenizerStep& step : spec_.pre_tokenizer) {
    std::vector<Word> next;
    for (Word& word : words) {
      const auto push_split = [&](std::string_view s, SplitPattern pattern) {
        bool first = word.at_input_start;
        for (std::string& piece : split_by_pattern(s, pattern)) {
          next.push_back({std::move(piece), first});
          first = false;
        }
      };
      switch (step.kind) {
        case PreTokenizerStep::Kind::kSplit:
          push_split(word.text, step.pattern);
          break;
        case PreTokenizerStep::Kind::kByteLevel: {
          if (step.add_prefix_space && (word.text.empty() || word.text[0] != ' ')) word.text.insert(0, " ");
          const size_t first_new = next.size();
          if (step.use_regex) {
            push_split(word.text, SplitPattern::kGpt2);
          } else {
            next.push_back(std::move(word));
          }
          for (size_t k = first_new; k < next.size(); ++k) next[k].text = to_byte_level_symbols(next[k].text);
          break;
        }
        case PreTokenizerStep::Kind::kMetaspace: {
          std::string s = replace_all(word.text, " ", step.replacement);
          const bool prepend = step.prepend_scheme == PrependScheme::kAlways ||
                               (step.prepend_scheme == PrependScheme::kFirst && word.at_input_start);
          if (prepend && s.compare(0, step.replacement.size(), step.replacement) != 0) s.insert(0, step.replacement);
          if (!step.split) {
            next.push_back({std::move(s), word.at_input_start});
            break;
          }
          // Each replacement character starts a new word, which it leads ("▁Hello▁world" -> "▁Hello", "▁world").
          size_t start = 0;
          bool first = word.at_input_start;
          while (start < s.size()) {
            size_t end = s.find(step.replacement, start + 1);
            if (end == std::string::npos) end = s.size();
            next.push_back({s.substr(start, end - start), first});
            first = false;
            start = end;
          }
          break;
        }
      }
    }
    words = std::move(next);
  }
  return words;
}

void BpeTokenizer::encode_word(const std::string& word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  if (spec_.ignore_merges) {
    const auto it = model_ids_.find(word);
    if (it != model_ids_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  if (word.size() > kMaxCachedWordBytes) {
    const std::vector<int32_t> result = bpe(word);
    ids.insert(ids.end(), result.begin(), result.end());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> result = bpe(word);
  ids.insert(ids.end(), result.begin(), result.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(word, std::move(result));
}

std::vector<int32_t> BpeTokenizer::bpe(const std::string& word) const {
  // The word's symbols as a linked list over an array; a merged-away symbol gets id -1.
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  std::vector<Symbol> symbols;
  bool last_was_unknown = false;
  const auto push = [&](int32_t id) {
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1});
  };
  for (size_t pos = 0; pos < word.size();) {
    const size_t length = unicode::decode_utf8(word, pos).length;
    const auto it = model_ids_.find(word.substr(pos, length));
    bool unknown = false;
    if (it != model_ids_.end()) {
      push(it->second);
    } else if (spec_.byte_fallback &&
               std::all_of(word.begin() + pos, word.begin() + pos + length,
                           [&](char c) { return byte_ids_[static_cast<uint8_t>(c)] >= 0; })) {
      for (size_t k = pos; k < pos + length; ++k) push(byte_ids_[static_cast<uint8_t>(word[k])]);
    } else if (spec_.unk_id >= 0) {
      unknown = true;
      if (!(spec_.fuse_unk && last_was_unknown)) push(spec_.unk_id);
    }
    // else: no <unk> to stand for it, so the character is dropped, as Hugging Face tokenizers does.
    last_was_unknown = unknown;
    pos += length;
  }
  if (symbols.empty()) return {};
  symbols.back().next = -1;

  // Candidate merges, lowest rank first, then leftmost. An entry is stale once either symbol has changed.
  struct Candidate {
    int32_t rank;
    int32_t left;
    int32_t left_id;
    int32_t right_id;
    int32_t result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto consider = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    const int32_t left_id = symbols[left].id, right_id = symbols[symbols[left].next].id;
    const auto it = merges_.find(pair_key(left_id, right_id));
    if (it != merges_.end()) queue.push({it->second.rank, left, left_id, right_id, it->second.result});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    if (left.id != top.left_id || left.next < 0 || symbols[left.next].id != top.right_id) continue;
    Symbol& right = symbols[left.next];
    left.id = top.result;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    right.id = -1;
    consider(left.prev);
    consider(top.left);
  }

  std::vector<int32_t> ids;
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
  return ids;
}

// ================================================================================================
// Front-end: GGUF "gpt2" vocabularies
// ================================================================================================

// Splits a merge written "left right". Pieces of a byte-level vocabulary never contain a space, but like
// llama.cpp we look for the separator after the first byte, so a left piece " " would still work.
std::pair<std::string, std::string> split_merge(const std::string& merge, const std::string& source,
                                                const std::string& field) {
  const size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string::npos;
  if (space == std::string::npos || space + 1 >= merge.size()) {
    throw Error::in_file(source, field, "\"left right\" (two pieces separated by a space)", "\"" + merge + "\"");
  }
  return {merge.substr(0, space), merge.substr(space + 1)};
}

int32_t gguf_token_id(const GgufFile& gguf, const std::string& key, size_t vocab_size) {
  if (!gguf.has(key)) return -1;
  const int64_t id = gguf.get_int(key);
  if (id < 0 || static_cast<uint64_t>(id) >= vocab_size) {
    throw Error::in_file(gguf.path, key, "a token id below the vocabulary size " + std::to_string(vocab_size),
                         std::to_string(id));
  }
  return static_cast<int32_t>(id);
}

}  // namespace

// The byte_level.h entry points (for the BPE trainer): the functions above, under public names.
namespace byte_level {
const std::string& symbol(uint8_t byte) { return ByteLevelAlphabet::get().symbol(byte); }
std::string to_symbols(std::string_view bytes) { return to_byte_level_symbols(bytes); }
std::vector<std::string> split_gpt2(std::string_view text) { return split_by_pattern(text, SplitPattern::kGpt2); }
}  // namespace byte_level

std::unique_ptr<Tokenizer> make_gguf_bpe_tokenizer(const GgufFile& gguf) {
  const std::string& model = gguf.get_string("tokenizer.ggml.model");
  if (model != "gpt2") throw Error::in_file(gguf.path, "tokenizer.ggml.model", "\"gpt2\"", "\"" + model + "\"");

  BpeSpec spec;
  spec.source = gguf.path;
  spec.vocab_field = "tokenizer.ggml.tokens";
  spec.pieces = gguf.get_string_array(spec.vocab_field);
  const size_t n = spec.pieces.size();
  std::vector<int64_t> types(n, static_cast<int64_t>(PieceType::kNormal));
  if (gguf.has("tokenizer.ggml.token_type")) {
    types = gguf.get_int_array("tokenizer.ggml.token_type");
    if (types.size() != n) {
      throw Error::in_file(gguf.path, "tokenizer.ggml.token_type", std::to_string(n) + " entries (one per token)",
                           std::to_string(types.size()));
    }
  }
  // llama.cpp looks every token up by its text, so all of them are in the BPE vocabulary.
  spec.in_model.assign(n, true);
  spec.roles.assign(n, TokenRole::kModel);
  for (size_t id = 0; id < n; ++id) {
    const auto type = static_cast<PieceType>(types[id]);
    if (type == PieceType::kControl || type == PieceType::kUnknown) spec.roles[id] = TokenRole::kSpecial;
    if (type == PieceType::kUserDefined) spec.roles[id] = TokenRole::kVerbatim;
    // Control and user-defined tokens are matched in the text verbatim (llama.cpp's parse_special,
    // Hugging Face's added tokens): chat templates write "<|endoftext|>" and friends as text.
    if ((type == PieceType::kControl || type == PieceType::kUserDefined) && !spec.pieces[id].empty()) {
      AddedToken token;
      token.id = static_cast<int32_t>(id);
      token.content = spec.pieces[id];
      spec.added_tokens.push_back(token);
    }
  }

  spec.merges_field = "tokenizer.ggml.merges";
  const std::vector<std::string> merges = gguf.get_string_array("tokenizer.ggml.merges");
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    spec.merges.push_back(split_merge(merges[i], gguf.path, spec.merges_field + "[" + std::to_string(i) + "]"));
  }

  // The pre-tokenizer regex, named the way llama.cpp's converter names it. Files written before the key existed
  // were made for llama.cpp's original BPE path, which used the GPT-2 regex.
  SplitPattern pattern = SplitPattern::kGpt2;
  if (gguf.has("tokenizer.ggml.pre")) {
    const std::string& pre = gguf.get_string("tokenizer.ggml.pre");
    if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
      pattern = SplitPattern::kLlama3;
      spec.ignore_merges = true;  // Llama-3's tokenizer.json sets ignore_merges, and llama.cpp follows it
    } else if (pre != "gpt-2" && pre != "gpt2" && pre != "phi-2") {
      throw Error::in_file(gguf.path, "tokenizer.ggml.pre",
                           "a pre-tokenizer implemented here: \"gpt-2\", \"phi-2\" (GPT-2 regex) or \"llama-bpe\" "
                           "(Llama-3 regex)",
                           "\"" + pre + "\"");
    }
  }
  if (pattern == SplitPattern::kLlama3) {
    PreTokenizerStep split;
    split.kind = PreTokenizerStep::Kind::kSplit;
    split.pattern = SplitPattern::kLlama3;
    spec.pre_tokenizer.push_back(split);
  }
  PreTokenizerStep byte_level;
  byte_level.kind = PreTokenizerStep::Kind::kByteLevel;
  byte_level.use_regex = pattern == SplitPattern::kGpt2;
  byte_level.add_prefix_space = false;  // llama.cpp's BPE path ignores tokenizer.ggml.add_space_prefix
  spec.pre_tokenizer.push_back(byte_level);
  spec.decoder.byte_level = true;

  spec.bos_id = gguf_token_id(gguf, "tokenizer.ggml.bos_token_id", n);
  spec.eos_id = gguf_token_id(gguf, "tokenizer.ggml.eos_token_id", n);
  spec.unk_id = gguf_token_id(gguf, "tokenizer.ggml.unknown_token_id", n);
  return std::make_unique<BpeTokenizer>(std::move(spec));
}

// ================================================================================================
// Front-end: Hugging Face tokenizer.json
// ================================================================================================

namespace {

using nlohmann::json;

// Reads the fields of one JSON file; every error names the file, the field path and what was expected.
class JsonFields {
 public:
  explicit JsonFields(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }

  [[noreturn]] void fail(const std::string& field, const std::string& expected, const json* got) const {
    throw Error::in_file(file_, field, expected, describe(got));
  }

  // obj[key] as an object / array / string / ...; a missing key or a null is an error unless optional.
  const json* find(const json& obj, const char* key) const {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  const json& object(const json& obj, const char* key, const std::string& field) const {
    const json* v = find(obj, key);
    if (!v || !v->is_object()) fail(field, "an object", v);
    return *v;
  }
  const json& array(const json& obj, const char* key, const std::string& field) const {
    const json* v = find(obj, key);
    if (!v || !v->is_array()) fail(field, "an array", v);
    return *v;
  }
  std::string string(const json& obj, const char* key, const std::string& field) const {
    const json* v = find(obj, key);
    if (!v || !v->is_string()) fail(field, "a string", v);
    return v->get<std::string>();
  }
  bool boolean(const json& obj, const char* key, const std::string& field, bool default_value) const {
    const json* v = find(obj, key);
    if (!v) return default_value;
    if (!v->is_boolean()) fail(field, "true or false", v);
    return v->get<bool>();
  }
  int64_t integer(const json& obj, const char* key, const std::string& field) const {
    const json* v = find(obj, key);
    if (!v || !v->is_number_integer()) fail(field, "an integer", v);
    return v->get<int64_t>();
  }
  // "type" of a component object, e.g. pre_tokenizer.type.
  std::string type(const json& component, const std::string& field) const {
    if (!component.is_object()) fail(field, "an object", &component);
    return string(component, "type", field + ".type");
  }

  static std::string describe(const json* v) {
    if (!v) return "nothing";
    if (v->is_string()) {
      std::string s = v->get<std::string>();
      return s.size() > 60 ? "\"" + s.substr(0, 60) + "...\"" : "\"" + s + "\"";
    }
    std::string dumped = v->dump();
    if (dumped.size() > 60) dumped = dumped.substr(0, 60) + "...";
    return std::string(v->type_name()) + " " + dumped;
  }

 private:
  std::string file_;
};

json parse_json_file(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error::at(path, std::string("not valid JSON (") + e.what() + ")");
  }
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// ---- model ----

void read_bpe_model(const JsonFields& in, const json& root, BpeSpec& spec,
                    std::vector<std::pair<std::string, int64_t>>& vocab) {
  const json& model = in.object(root, "model", "model");
  const std::string type = in.find(model, "type") ? in.string(model, "type", "model.type") : "BPE";
  if (type != "BPE") in.fail("model.type", "BPE", in.find(model, "type"));

  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = in.find(model, affix);
    if (v && !(v->is_string() && v->get<std::string>().empty())) {
      in.fail(std::string("model.") + affix, "null (word-piece affixes are not supported)", v);
    }
  }
  if (const json* dropout = in.find(model, "dropout")) {
    // BPE dropout makes encoding random; speculative decoding needs the deterministic tokenization.
    if (!dropout->is_number() || dropout->get<double>() != 0.0) in.fail("model.dropout", "null or 0", dropout);
  }

  const json& vocab_json = in.object(model, "vocab", "model.vocab");
  vocab.reserve(vocab_json.size());
  for (auto it = vocab_json.begin(); it != vocab_json.end(); ++it) {
    const std::string field = "model.vocab[\"" + it.key() + "\"]";
    if (!it->is_number_integer()) in.fail(field, "a token id", &*it);
    const int64_t id = it->get<int64_t>();
    if (id < 0 || id >= (int64_t{1} << 24)) in.fail(field, "a token id in [0, 16777216)", &*it);
    vocab.emplace_back(it.key(), id);
  }

  spec.merges_field = "model.merges";
  const json& merges = in.array(model, "merges", "model.merges");
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string field = "model.merges[" + std::to_string(i) + "]";
    const json& m = merges[i];
    if (m.is_string()) {
      // Older files write "left right"; Hugging Face requires exactly one space.
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == s.size() || s.find(' ', space + 1) != std::string::npos) {
        in.fail(field, "\"left right\" (two pieces separated by one space)", &m);
      }
      spec.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      in.fail(field, "\"left right\" or [\"left\", \"right\"]", &m);
    }
  }

  spec.byte_fallback = in.boolean(model, "byte_fallback", "model.byte_fallback", false);
  spec.fuse_unk = in.boolean(model, "fuse_unk", "model.fuse_unk", false);
  spec.ignore_merges = in.boolean(model, "ignore_merges", "model.ignore_merges", false);
}

// ---- normalizer ----

void read_normalizer(const JsonFields& in, const json& node, const std::string& field, BpeSpec& spec) {
  const std::string type = in.type(node, field);
  if (type == "Sequence") {
    const json& steps = in.array(node, "normalizers", field + ".normalizers");
    for (size_t i = 0; i < steps.size(); ++i) {
      read_normalizer(in, steps[i], field + ".normalizers[" + std::to_string(i) + "]", spec);
    }
  } else if (type == "Prepend") {
    spec.normalizer.push_back({NormalizerStep::Kind::kPrepend, "", in.string(node, "prepend", field + ".prepend")});
  } else if (type == "Replace") {
    const json& pattern = in.object(node, "pattern", field + ".pattern");
    const json* literal = in.find(pattern, "String");
    if (!literal || !literal->is_string() || literal->get<std::string>().empty()) {
      in.fail(field + ".pattern", "{\"String\": non-empty text} (regex patterns are not supported)", &pattern);
    }
    spec.normalizer.push_back(
        {NormalizerStep::Kind::kReplace, literal->get<std::string>(), in.string(node, "content", field + ".content")});
  } else {
    in.fail(field + ".type", "Sequence, Prepend or Replace (the normalizers implemented here)", in.find(node, "type"));
  }
}

// ---- pre-tokenizer ----

PrependScheme read_prepend_scheme(const JsonFields& in, const json& node, const std::string& field) {
  if (in.find(node, "prepend_scheme")) {
    const std::string scheme = in.string(node, "prepend_scheme", field + ".prepend_scheme");
    if (scheme == "always") return PrependScheme::kAlways;
    if (scheme == "first") return PrependScheme::kFirst;
    if (scheme == "never") return PrependScheme::kNever;
    in.fail(field + ".prepend_scheme", "always, first or never", in.find(node, "prepend_scheme"));
  }
  // Files from before tokenizers 0.14 say add_prefix_space instead.
  return in.boolean(node, "add_prefix_space", field + ".add_prefix_space", true) ? PrependScheme::kAlways
                                                                                  : PrependScheme::kNever;
}

void read_pre_tokenizer(const JsonFields& in, const json& node, const std::string& field, BpeSpec& spec) {
  const std::string type = in.type(node, field);
  PreTokenizerStep step;
  if (type == "Sequence") {
    const json& steps = in.array(node, "pretokenizers", field + ".pretokenizers");
    for (size_t i = 0; i < steps.size(); ++i) {
      read_pre_tokenizer(in, steps[i], field + ".pretokenizers[" + std::to_string(i) + "]", spec);
    }
    return;
  } else if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = in.boolean(node, "add_prefix_space", field + ".add_prefix_space", true);
    step.use_regex = in.boolean(node, "use_regex", field + ".use_regex", true);
  } else if (type == "Metaspace") {
    step.kind = PreTokenizerStep::Kind::kMetaspace;
    step.replacement = in.string(node, "replacement", field + ".replacement");
    if (step.replacement.empty()) in.fail(field + ".replacement", "a non-empty string", in.find(node, "replacement"));
    step.prepend_scheme = read_prepend_scheme(in, node, field);
    step.split = in.boolean(node, "split", field + ".split", true);
  } else if (type == "Split") {
    step.kind = PreTokenizerStep::Kind::kSplit;
    const json& pattern = in.object(node, "pattern", field + ".pattern");
    const json* regex = in.find(pattern, "Regex");
    const std::string expected = "{\"Regex\": the GPT-2 or Llama-3 split regex} (the patterns implemented here)";
    if (!regex || !regex->is_string()) in.fail(field + ".pattern", expected, &pattern);
    const std::string text = regex->get<std::string>();
    if (text == kGpt2Regex) {
      step.pattern = SplitPattern::kGpt2;
    } else if (text == kLlama3Regex) {
      step.pattern = SplitPattern::kLlama3;
    } else {
      in.fail(field + ".pattern.Regex", "the GPT-2 or Llama-3 split regex (the patterns implemented here)", regex);
    }
    const std::string behavior = in.string(node, "behavior", field + ".behavior");
    if (behavior != "Isolated") in.fail(field + ".behavior", "Isolated", in.find(node, "behavior"));
    if (in.boolean(node, "invert", field + ".invert", false)) in.fail(field + ".invert", "false", in.find(node, "invert"));
  } else {
    in.fail(field + ".type", "Sequence, ByteLevel, Metaspace or Split (the pre-tokenizers implemented here)",
            in.find(node, "type"));
  }
  spec.pre_tokenizer.push_back(step);
}

// ---- decoder ----

void read_decoder(const JsonFields& in, const json& node, const std::string& field, BpeSpec& spec) {
  const std::string type = in.type(node, field);
  DecoderSpec& decoder = spec.decoder;
  if (type == "Sequence") {
    const json& steps = in.array(node, "decoders", field + ".decoders");
    for (size_t i = 0; i < steps.size(); ++i) {
      read_decoder(in, steps[i], field + ".decoders[" + std::to_string(i) + "]", spec);
    }
  } else if (type == "ByteLevel") {
    decoder.byte_level = true;
  } else if (type == "ByteFallback") {
    decoder.byte_fallback = true;
  } else if (type == "Fuse") {
    // Joins the pieces into one string: token_bytes output is concatenated anyway.
  } else if (type == "Replace") {
    const json& pattern = in.object(node, "pattern", field + ".pattern");
    const json* literal = in.find(pattern, "String");
    if (!literal || !literal->is_string() || literal->get<std::string>().empty()) {
      in.fail(field + ".pattern", "{\"String\": non-empty text} (regex patterns are not supported)", &pattern);
    }
    decoder.replacements.emplace_back(literal->get<std::string>(), in.string(node, "content", field + ".content"));
  } else if (type == "Strip") {
    // Llama-2 strips the one space that the normalizer prepended: SentencePiece's dummy prefix.
    const std::string content = in.string(node, "content", field + ".content");
    if (content != " ") in.fail(field + ".content", "\" \"", in.find(node, "content"));
    const int64_t start = in.integer(node, "start", field + ".start");
    const int64_t stop = in.integer(node, "stop", field + ".stop");
    if (start < 0 || start > 1) in.fail(field + ".start", "0 or 1", in.find(node, "start"));
    if (stop != 0) in.fail(field + ".stop", "0", in.find(node, "stop"));
    decoder.strip_space_after_bos = decoder.strip_space_after_bos || start == 1;
  } else if (type == "Metaspace") {
    decoder.replacements.emplace_back(in.string(node, "replacement", field + ".replacement"), " ");
    decoder.strip_space_after_bos = read_prepend_scheme(in, node, field) != PrependScheme::kNever;
  } else {
    in.fail(field + ".type", "Sequence, ByteLevel, ByteFallback, Fuse, Replace, Strip or Metaspace",
            in.find(node, "type"));
  }
}

// ---- added tokens, special token ids ----

void read_added_tokens(const JsonFields& in, const json& root, BpeSpec& spec, std::vector<bool>& special) {
  const json* list = in.find(root, "added_tokens");
  if (!list) return;
  if (!list->is_array()) in.fail("added_tokens", "an array", list);
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    const json& entry = (*list)[i];
    if (!entry.is_object()) in.fail(field, "an object", &entry);
    AddedToken token;
    const int64_t id = in.integer(entry, "id", field + ".id");
    if (id < 0 || id >= (int64_t{1} << 24)) in.fail(field + ".id", "a token id in [0, 16777216)", in.find(entry, "id"));
    token.id = static_cast<int32_t>(id);
    token.content = in.string(entry, "content", field + ".content");
    if (token.content.empty()) in.fail(field + ".content", "a non-empty string", in.find(entry, "content"));
    token.lstrip = in.boolean(entry, "lstrip", field + ".lstrip", false);
    token.rstrip = in.boolean(entry, "rstrip", field + ".rstrip", false);
    token.single_word = in.boolean(entry, "single_word", field + ".single_word", false);
    special.push_back(in.boolean(entry, "special", field + ".special", false));
    spec.added_tokens.push_back(std::move(token));
  }
}

int32_t find_piece(const BpeSpec& spec, const std::string& text) {
  for (const AddedToken& token : spec.added_tokens) {
    if (token.content == text) return token.id;
  }
  const auto it = std::find(spec.pieces.begin(), spec.pieces.end(), text);
  return it == spec.pieces.end() ? -1 : static_cast<int32_t>(it - spec.pieces.begin());
}

// BOS / EOS: tokenizer_config.json's bos_token / eos_token when it names them (a string, or an AddedToken object
// with "content"; null means none), else the usual names.
void read_special_ids(const std::string& tokenizer_json_path, BpeSpec& spec) {
  const std::vector<std::string> bos_names = {"<s>", "<|begin_of_text|>", "<|endoftext|>"};
  const std::vector<std::string> eos_names = {"</s>", "<|end_of_text|>", "<|eot_id|>", "<|endoftext|>"};
  const auto by_name = [&](const std::vector<std::string>& names) {
    for (const std::string& name : names) {
      const int32_t id = find_piece(spec, name);
      if (id >= 0) return id;
    }
    return int32_t{-1};
  };
  spec.bos_id = by_name(bos_names);
  spec.eos_id = by_name(eos_names);

  const std::string config_path = directory_of(tokenizer_json_path) + "/tokenizer_config.json";
  if (!is_file(config_path)) return;
  const json config = parse_json_file(config_path);
  const JsonFields in(config_path);
  if (!config.is_object()) in.fail("(top level)", "an object", &config);
  for (const auto& [key, id] : {std::pair<const char*, int32_t*>{"bos_token", &spec.bos_id},
                                std::pair<const char*, int32_t*>{"eos_token", &spec.eos_id}}) {
    const auto it = config.find(key);
    if (it == config.end()) continue;
    if (it->is_null()) {
      *id = -1;
      continue;
    }
    std::string name;
    if (it->is_string()) {
      name = it->get<std::string>();
    } else if (it->is_object()) {
      name = in.string(*it, "content", std::string(key) + ".content");
    } else {
      in.fail(key, "a token string, {\"content\": token} or null", &*it);
    }
    *id = find_piece(spec, name);
    if (*id < 0) in.fail(key, "a token of " + tokenizer_json_path, &*it);
  }
}

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& path_or_dir) {
  const std::string path = is_directory(path_or_dir) ? path_or_dir + "/tokenizer.json" : path_or_dir;
  const json root = parse_json_file(path);
  const JsonFields in(path);
  if (!root.is_object()) in.fail("(top level)", "an object", &root);

  BpeSpec spec;
  spec.source = path;
  spec.vocab_field = "model.vocab";
  std::vector<std::pair<std::string, int64_t>> vocab;
  read_bpe_model(in, root, spec, vocab);
  std::vector<bool> added_special;
  read_added_tokens(in, root, spec, added_special);

  // Ids: the model's vocabulary, plus added tokens (Llama-3's specials sit above the model's 128000 pieces).
  int64_t size = 0;
  for (const auto& entry : vocab) size = std::max(size, entry.second + 1);
  for (const AddedToken& token : spec.added_tokens) size = std::max<int64_t>(size, token.id + 1);
  spec.pieces.assign(size, "");
  spec.roles.assign(size, TokenRole::kUnused);
  spec.in_model.assign(size, false);
  for (const auto& [piece, id] : vocab) {
    if (spec.in_model[id]) {
      throw Error::in_file(path, "model.vocab[\"" + piece + "\"]", "an id no other piece has",
                           std::to_string(id) + ", the id of \"" + spec.pieces[id] + "\" too");
    }
    spec.pieces[id] = piece;
    spec.roles[id] = TokenRole::kModel;
    spec.in_model[id] = true;
  }
  for (size_t i = 0; i < spec.added_tokens.size(); ++i) {
    const AddedToken& token = spec.added_tokens[i];
    // An added token usually repeats a vocabulary entry; where it does not, its content names the id.
    if (!spec.in_model[token.id]) spec.pieces[token.id] = token.content;
    if (added_special[i]) {
      spec.roles[token.id] = TokenRole::kSpecial;
    } else if (!spec.in_model[token.id]) {
      spec.roles[token.id] = TokenRole::kVerbatim;
    }
  }
  if (const json* unk = in.find(in.object(root, "model", "model"), "unk_token")) {
    if (!unk->is_string()) in.fail("model.unk_token", "a token string or null", unk);
    const std::string name = unk->get<std::string>();
    for (size_t id = 0; id < spec.pieces.size() && spec.unk_id < 0; ++id) {
      if (spec.in_model[id] && spec.pieces[id] == name) spec.unk_id = static_cast<int32_t>(id);
    }
    if (spec.unk_id < 0) in.fail("model.unk_token", "a piece of model.vocab", unk);
  }

  if (const json* normalizer = in.find(root, "normalizer")) read_normalizer(in, *normalizer, "normalizer", spec);
  if (const json* pre = in.find(root, "pre_tokenizer")) read_pre_tokenizer(in, *pre, "pre_tokenizer", spec);
  // Without a decoder the pieces are their own text.
  if (const json* decoder = in.find(root, "decoder")) read_decoder(in, *decoder, "decoder", spec);

  read_special_ids(path, spec);
  return std::make_unique<BpeTokenizer>(std::move(spec));
}

}  // namespace draftlab
