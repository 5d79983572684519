// The GGUF form of a byte-level BPE: make_gguf_bpe_tokenizer reads a GGUF "gpt2" vocabulary into a BpeSpec, and
// BpeTokenizer::gguf_vocabulary writes a BPE tokenizer as one (with the llama.cpp pre-tokenizer name that matches).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/base/error.h"
#include "core/io/gguf.h"
#include "core/text/gguf_vocabulary.h"
#include "core/text/tokenizer_bpe_internal.h"
#include "core/text/tokenizer_internal.h"

namespace draftlab {

// ================================================================================================
// BpeTokenizer as a GGUF vocabulary
// ================================================================================================

namespace {

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

}  // namespace

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

// ================================================================================================
// Front-end: GGUF "gpt2" vocabularies
// ================================================================================================

namespace {

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

}  // namespace draftlab
