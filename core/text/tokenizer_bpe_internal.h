// Byte-level / Hugging Face BPE internals shared by its implementation files (not part of the public API): the
// split patterns, the BpeSpec a front-end fills, and the BpeTokenizer engine that runs it.
//
//   tokenizer_bpe.cpp              - the BpeTokenizer engine: added tokens, normalizer, pre-tokenizer steps, BPE merges
//   tokenizer_bpe_pretokenizer.cpp - GPT-2's byte-level alphabet and the GPT-2 / Llama-3 split regexes (by hand)
//   tokenizer_bpe_gguf.cpp         - GGUF "gpt2": make_gguf_bpe_tokenizer and BpeTokenizer::gguf_vocabulary
//   tokenizer_bpe_json.cpp         - Hugging Face tokenizer.json: load_hf_tokenizer_json
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/text/tokenizer.h"

namespace draftlab {

// ================================================================================================
// Pre-tokenizer split patterns and the byte-level alphabet (tokenizer_bpe_pretokenizer.cpp)
// ================================================================================================

// The two split regexes in use, spelled exactly as tokenizer.json files store them.
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

enum class SplitPattern { kGpt2, kLlama3 };

// Splits text into the consecutive matches of the pattern. Every character falls in some alternative of both
// regexes, so the pieces cover the text exactly.
std::vector<std::string> split_by_pattern(std::string_view text, SplitPattern pattern);

// Every byte of `text` replaced by its GPT-2 byte-level symbol.
std::string to_byte_level_symbols(std::string_view text);

// Inverse of to_byte_level_symbols. Characters outside the alphabet are kept as they are (as Hugging Face's
// ByteLevel decoder does), so a piece that was never byte-level encoded survives.
std::string from_byte_level_symbols(std::string_view symbols);

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

}  // namespace draftlab
