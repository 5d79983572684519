// Tokenizer - text <-> token ids, implemented here for every vocabulary format draftlab reads.
// (Debian's sentencepiece library cannot be linked beside libtorch: two protobufs.)
//
// Formats and their loaders:
//   llama2.c tokenizer.bin          -> load_llama2c_tokenizer   (run.c's score-merge BPE)
//   SentencePiece tokenizer.model   -> load_sentencepiece_model (Llama-2 BPE, scores as merge priority)
//   GGUF vocabulary metadata        -> load_gguf_tokenizer      ("llama" = SentencePiece, "gpt2" = byte-level BPE)
//   Hugging Face tokenizer.json     -> load_hf_tokenizer_json   (model type BPE: ByteLevel or Metaspace/byte-fallback)
// load_tokenizer() picks by file name / content.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace draftlab {

struct GgufVocabulary;  // core/text/gguf_vocabulary.h

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text to ids. add_bos prepends bos_id() when the vocabulary has one.
  // Matches the reference implementation of the format (run.c, llama.cpp / SentencePiece, HF tokenizers).
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;

  // The raw bytes this token stands for in the output stream (byte tokens give their byte, "▁" gives " ",
  // GPT-2 byte-level symbols are mapped back to bytes). `prev` is the preceding token or -1: SentencePiece-style
  // vocabularies drop the leading space of the first piece after BOS, as run.c and llama.cpp do.
  // Control tokens (BOS/EOS/...) give "".
  virtual std::string token_bytes(int32_t prev, int32_t id) const = 0;

  // The vocabulary entry as stored in the file (for debugging / display).
  virtual const std::string& piece(int32_t id) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if none
  virtual int32_t eos_id() const = 0;  // -1 if none

  // The vocabulary as GGUF tokenizer metadata that llama.cpp encodes identically (core/text/gguf_vocabulary.h).
  // Throws Error naming the tokenizer's file when its behaviour has no GGUF spelling; the default always does.
  virtual GgufVocabulary gguf_vocabulary() const;

  // Whole sequence to text (concatenated token_bytes; may hold invalid UTF-8 if ids are cut mid-character).
  std::string decode(const std::vector<int32_t>& ids) const;
};

// Picks the loader: *.bin -> llama2.c, *.model -> SentencePiece, *.gguf -> GGUF, *.json or a folder holding
// tokenizer.json -> Hugging Face. Throws Error naming the file on anything malformed.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path, int32_t vocab_size = -1);
std::unique_ptr<Tokenizer> load_sentencepiece_model(const std::string& path);
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path);
std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& path);

}  // namespace draftlab
