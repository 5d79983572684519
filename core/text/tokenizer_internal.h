// Declarations shared between the tokenizer implementation files (not part of the public API).
//
//   tokenizer.cpp         - load_tokenizer / load_gguf_tokenizer dispatch, Tokenizer::decode
//   tokenizer_spm.cpp     - SentencePiece BPE (tokenizer.model and GGUF "llama" vocabularies)
//   tokenizer_llama2c.cpp - llama2.c tokenizer.bin
//   tokenizer_bpe*.cpp    - byte-level / Hugging Face BPE (tokenizer.json and GGUF "gpt2" vocabularies;
//                           their files are listed in tokenizer_bpe_internal.h)
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/io/gguf.h"
#include "core/text/tokenizer.h"

namespace draftlab {

// GGUF vocabulary with tokenizer.ggml.model == "gpt2" (byte-level BPE with merges). In tokenizer_bpe_gguf.cpp.
std::unique_ptr<Tokenizer> make_gguf_bpe_tokenizer(const GgufFile& gguf);

// GGUF vocabulary with tokenizer.ggml.model == "llama" (SentencePiece BPE with scores). In tokenizer_spm.cpp.
std::unique_ptr<Tokenizer> make_gguf_spm_tokenizer(const GgufFile& gguf);

// Piece types, numbered as in SentencePiece's ModelProto and GGUF's tokenizer.ggml.token_type.
enum class PieceType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// "<0x0A>" -> 0x0A; anything else -> -1. The byte-fallback spelling shared by SentencePiece, GGUF and HF vocabularies.
int parse_byte_piece(std::string_view piece);

// Number of bytes of the UTF-8 sequence that starts with `lead` (1 for ASCII, continuation or invalid bytes;
// 2-4 for multi-byte lead bytes). Tokenizers split text into "characters" with it, the way llama.cpp and
// SentencePiece do; it does not validate the sequence.
size_t utf8_sequence_length(uint8_t lead);

// Piece text -> id. The views point into the tokenizer's own piece strings, which must outlive the index.
using PieceIndex = std::unordered_map<std::string_view, int32_t>;

}  // namespace draftlab
