// Training a byte-level BPE vocabulary (GPT-2 style) on a text corpus, and saving it as a Hugging Face
// tokenizer.json that load_hf_tokenizer_json (and Hugging Face `tokenizers`) reads.
//
// Training, as in GPT-2 / Hugging Face's BpeTrainer:
//   1. the corpus is cut around the special tokens (encoding cuts them out the same way), then split into words
//      by the GPT-2 pre-tokenizer regex ("once upon a" -> "once", " upon", " a"); identical words are counted
//   2. every word starts as its bytes; the 256 byte symbols are the initial vocabulary
//   3. the most frequent adjacent pair of symbols (summed over the words, weighted by their counts) is merged
//      into a new symbol everywhere, until the vocabulary has vocab_size entries or no pair occurs at least
//      min_frequency times. Ties go to the pair whose (left, right) byte strings sort first.
//
// Ids of the result: the special tokens first (0 = <s> = BOS, 1 = </s> = EOS by default), then the 256 byte
// symbols in byte order, then the merged symbols in the order they were learned. Same text and options give
// byte-identical files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace draftlab {

struct BpeTrainerOptions {
  int vocab_size = 0;  // specials + 256 bytes + merges; at least 256 + special_tokens.size()
  std::vector<std::string> special_tokens{"<s>", "</s>"};  // non-empty, distinct, valid UTF-8
  int min_frequency = 2;  // a pair seen fewer times is never merged (training may then stop short)
};

// A trained vocabulary. Pieces are spelled in GPT-2's byte-level symbols (a space is "Ġ"), as tokenizer.json
// stores them.
struct BpeVocabulary {
  std::vector<std::string> special_tokens;                  // ids 0 .. specials-1
  std::vector<std::pair<std::string, std::string>> merges;  // by rank: merge i makes id specials + 256 + i

  int size() const { return static_cast<int>(special_tokens.size() + 256 + merges.size()); }
  // Every piece, by id.
  std::vector<std::string> pieces() const;
};

// Called after each merge with the number done and the number asked for (which may not all be reached).
using BpeProgress = std::function<void(int merges_done, int merges_wanted)>;

// Trains on `text` (any bytes; invalid UTF-8 is still encoded byte by byte). Throws Error naming the option
// for a vocab_size below 256 + specials, min_frequency below 1, a bad special token, or an empty text.
BpeVocabulary train_bpe(std::string_view text, const BpeTrainerOptions& options, const BpeProgress& progress = {});

// The tokenizer.json text: model BPE (vocab, merges "left right"), ByteLevel pre-tokenizer and decoder
// (add_prefix_space false), the special tokens as added_tokens with special = true.
std::string bpe_tokenizer_json(const BpeVocabulary& vocab);

// The tokenizer_config.json text: bos_token = the first special token, eos_token = the second (the first when
// there is only one; both null when there are none).
std::string bpe_tokenizer_config_json(const BpeVocabulary& vocab);

// Writes DIR/tokenizer.json and DIR/tokenizer_config.json, each atomically. DIR must exist; throws Error naming
// the file that could not be written.
void save_bpe_tokenizer(const BpeVocabulary& vocab, const std::string& dir);

}  // namespace draftlab
