// GgufVocabulary - a tokenizer as GGUF's tokenizer.ggml.* metadata (Tokenizer::gguf_vocabulary() makes one), chosen so that llama.cpp (and draftlab's own
// load_gguf_tokenizer) encode text to the same ids as the tokenizer it came from.
//
//   byte-level BPE (tokenizer.json with merges)  -> model "gpt2": tokens, token_type, merges, pre-tokenizer name
//   SentencePiece tokenizer.model                -> model "llama": tokens, scores, token_type
//   llama2.c tokenizer.bin                       -> model "llama": its pieces with " " written as "▁", <unk>/<s>/</s>
//                                                   named, <0xXX> typed as bytes (as llama.cpp's own converter does)
// A tokenizer whose behaviour has no GGUF spelling (a Metaspace tokenizer.json, ByteLevel with add_prefix_space,
// a split regex llama.cpp does not know) is refused with an Error naming its file, rather than written wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace draftlab {

class GgufWriter;

struct GgufVocabulary {
  std::string model;                 // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre;                   // tokenizer.ggml.pre ("gpt2" only): "gpt-2" or "llama-bpe"
  std::vector<std::string> tokens;   // by id
  std::vector<int32_t> token_types;  // by id, numbered as SentencePiece / llama.cpp: 1 normal, 2 unknown,
                                     // 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<float> scores;         // "llama" only: merge priority by id
  std::vector<std::string> merges;   // "gpt2" only: "left right", best rank first
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  bool add_space_prefix = false;          // "llama": SentencePiece's dummy prefix
  bool remove_extra_whitespaces = false;  // "llama"

  // Pads to `vocab_size` ids with "[PAD<id>]" tokens of type unused (score 0), as llama.cpp's converter does for
  // models whose embedding has more rows than the tokenizer has tokens. Throws Error if the vocabulary is larger.
  void pad_to(int64_t vocab_size);

  // Adds the tokenizer.ggml.* keys (bos/eos/unk only when >= 0; add_bos_token true, add_eos_token false: draftlab
  // starts every prompt with BOS, and llama.cpp's "gpt-2" pre-tokenizer would otherwise not).
  void write_to(GgufWriter& writer) const;
};

}  // namespace draftlab
