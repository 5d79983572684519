// Tokenizer::decode, the small helpers the tokenizers share, and the loaders that pick a format by file name.
#include "core/text/tokenizer.h"

#include <algorithm>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/gguf.h"
#include "core/text/tokenizer_internal.h"

namespace draftlab {

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  int32_t prev = -1;
  for (int32_t id : ids) {
    text += token_bytes(prev, id);
    prev = id;
  }
  return text;
}

int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(piece[3]), lo = hex(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

size_t utf8_sequence_length(uint8_t lead) {
  // Indexed by the high nibble, as in llama.cpp's unicode_len_utf8 and SentencePiece's OneCharLen.
  static const uint8_t kLength[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLength[lead >> 4];
}

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// First bytes of a file, for telling formats apart when the name does not.
std::string file_prefix(const std::string& path, size_t n) {
  FileBytes bytes(path);
  return std::string(reinterpret_cast<const char*>(bytes.data()), std::min(n, bytes.size()));
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path) {
  const GgufFile gguf = read_gguf(path);
  const std::string& model = gguf.get_string("tokenizer.ggml.model");
  if (model == "llama") return make_gguf_spm_tokenizer(gguf);
  if (model == "gpt2") return make_gguf_bpe_tokenizer(gguf);
  throw Error::in_file(path, "tokenizer.ggml.model", "\"llama\" (SentencePiece) or \"gpt2\" (byte-level BPE)",
                       "\"" + model + "\"");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (is_directory(path)) {
    // A Hugging Face model folder. tokenizer.json is the complete description; tokenizer.model (SentencePiece)
    // is the older form some Llama repositories ship alone.
    const std::string json = path + "/tokenizer.json";
    const std::string spm = path + "/tokenizer.model";
    if (is_file(json)) return load_hf_tokenizer_json(json);
    if (is_file(spm)) return load_sentencepiece_model(spm);
    throw Error::at(path, "directory holds neither tokenizer.json nor tokenizer.model");
  }
  if (!is_file(path)) throw Error::at(path, "tokenizer file not found");
  if (ends_with(path, ".bin")) return load_llama2c_tokenizer(path);
  if (ends_with(path, ".model")) return load_sentencepiece_model(path);
  if (ends_with(path, ".gguf")) return load_gguf_tokenizer(path);
  if (ends_with(path, ".json")) return load_hf_tokenizer_json(path);

  // Unfamiliar name: recognise the formats that announce themselves.
  const std::string head = file_prefix(path, 4);
  if (head == "GGUF") return load_gguf_tokenizer(path);
  if (!head.empty() && head[0] == '{') return load_hf_tokenizer_json(path);
  throw Error::in_file(path, "tokenizer format",
                       "a name ending in .bin (llama2.c), .model (SentencePiece), .gguf or .json, or a folder with "
                       "tokenizer.json",
                       "an unrecognised file");
}

}  // namespace draftlab
