// GPT-2's byte-level BPE building blocks, defined in tokenizer_bpe_pretokenizer.cpp and shared with the BPE trainer
// (bpe_trainer.h), so that a trained vocabulary sees text exactly as the tokenizer that loads it will.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace draftlab::byte_level {

// GPT-2's bytes_to_unicode(): the printable symbol (UTF-8) that stands for a byte in vocabularies
// (0x20 space -> "Ġ", 0x0A newline -> "Ċ", 'a' -> "a").
const std::string& symbol(uint8_t byte);

// Every byte of `bytes` replaced by its symbol.
std::string to_symbols(std::string_view bytes);

// The GPT-2 pre-tokenizer: the consecutive matches of
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// which cover `text` exactly ("Hello world" -> "Hello", " world"). Used by the ByteLevel pre-tokenizer.
std::vector<std::string> split_gpt2(std::string_view text);

}  // namespace draftlab::byte_level
