// Byte-level BPE training (see bpe_trainer.h for the algorithm) and the tokenizer.json writer.
//
// The merge loop is incremental, as in Hugging Face's BpeTrainer: pair counts are kept in a map and only the
// words that contain the merged pair are revisited, so a merge costs the size of those words, not the corpus.
// The most frequent pair comes from a max-heap whose entries may be stale (a count only ever falls after it
// was pushed, except for the new pairs of a merge, which are pushed again): a popped entry whose count is out
// of date is pushed back with the current count, and the first up-to-date entry popped is the true maximum.
#include "core/text/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/text/byte_level.h"
#include "core/text/unicode_categories.h"

namespace draftlab {
namespace {

// ================================================================================================
// Words: the pre-tokenized corpus, counted
// ================================================================================================

using WordCounts = std::unordered_map<std::string, int64_t>;

bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// The pre-tokenizer decodes its whole input at once (a few words of memory per byte), so a large corpus is
// split in chunks of about this size. WHY cuts are only at "letter| letter": there, every match of the GPT-2
// regex ends at the cut whether or not the text goes on (a letter run stops at the space; " letter..." starts
// a new match that looks only forward), so the chunks split exactly as the whole text would.
constexpr size_t kChunkBytes = size_t{1} << 20;

size_t next_cut(std::string_view text, size_t from) {
  for (size_t p = std::max<size_t>(from, 1); p + 1 < text.size(); ++p) {
    if (text[p] == ' ' && is_ascii_letter(text[p - 1]) && is_ascii_letter(text[p + 1])) return p;
  }
  return text.size();
}

void count_words_of_segment(std::string_view segment, WordCounts& counts) {
  for (size_t begin = 0; begin < segment.size();) {
    const size_t end = segment.size() - begin <= kChunkBytes ? segment.size() : next_cut(segment, begin + kChunkBytes);
    for (std::string& word : byte_level::split_gpt2(segment.substr(begin, end - begin))) ++counts[std::move(word)];
    begin = end;
  }
}

// Counts the words of `text`. The special tokens are cut out first, as encoding cuts them out before the
// pre-tokenizer: the text between them is what BPE will see.
WordCounts count_words(std::string_view text, const std::vector<std::string>& specials) {
  WordCounts counts;
  // next_hit[i]: where specials[i] occurs next at or after pos (npos: nowhere), so the text is searched once.
  std::vector<size_t> next_hit;
  for (const std::string& special : specials) next_hit.push_back(text.find(special));
  size_t pos = 0;
  while (pos < text.size()) {
    size_t hit = std::string_view::npos, hit_length = 0;
    for (size_t i = 0; i < specials.size(); ++i) {
      if (next_hit[i] != std::string_view::npos && next_hit[i] < pos) next_hit[i] = text.find(specials[i], pos);
      // The earliest occurrence; the longest special where two start at the same place.
      if (next_hit[i] < hit || (next_hit[i] == hit && hit != std::string_view::npos && specials[i].size() > hit_length)) {
        hit = next_hit[i];
        hit_length = specials[i].size();
      }
    }
    if (hit == std::string_view::npos) hit = text.size();
    count_words_of_segment(text.substr(pos, hit - pos), counts);
    pos = hit + hit_length;
  }
  return counts;
}

// ================================================================================================
// The merge loop
// ================================================================================================

// A pair of adjacent symbol ids, packed for hashing.
using PairKey = uint64_t;
PairKey pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
int32_t left_of(PairKey key) { return static_cast<int32_t>(key >> 32); }
int32_t right_of(PairKey key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

class BpeTrainer {
 public:
  BpeTrainer(const WordCounts& counts, const std::vector<std::string>& specials) {
    // Symbols 0..255 are the bytes; merge i makes symbol 256 + i. Spelled as raw bytes here.
    for (int b = 0; b < 256; ++b) symbols_.emplace_back(1, static_cast<char>(b));
    for (int b = 0; b < 256; ++b) taken_.insert(byte_level::symbol(static_cast<uint8_t>(b)));
    for (const std::string& special : specials) taken_.insert(special);

    // Sorted words, so that the trainer's state does not depend on the hash map's order.
    std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [text, count] : sorted) {
      std::vector<int32_t> word(text.begin(), text.end());
      for (int32_t& s : word) s = static_cast<uint8_t>(s);
      words_.push_back(std::move(word));
      word_counts_.push_back(count);
    }
    for (int32_t w = 0; w < static_cast<int32_t>(words_.size()); ++w) {
      const std::vector<int32_t>& word = words_[w];
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        const PairKey key = pair_key(word[i], word[i + 1]);
        pair_counts_[key] += word_counts_[w];
        pair_words_[key].push_back(w);
      }
    }
    // Pushed in key order, for the same reason as above (the heap's result does not depend on it anyway).
    std::vector<PairKey> keys;
    for (const auto& entry : pair_counts_) keys.push_back(entry.first);
    std::sort(keys.begin(), keys.end());
    for (PairKey key : keys) heap_.push({pair_counts_[key], key});
  }

  // Learns up to `wanted` merges, as raw-byte (left, right) strings.
  std::vector<std::pair<std::string, std::string>> train(int wanted, int min_frequency, const BpeProgress& progress) {
    std::vector<std::pair<std::string, std::string>> merges;
    while (static_cast<int>(merges.size()) < wanted && !heap_.empty()) {
      const HeapEntry top = heap_.top();
      heap_.pop();
      const auto it = pair_counts_.find(top.key);
      const int64_t current = it == pair_counts_.end() ? 0 : it->second;
      if (current != top.count) {
        if (current > 0) heap_.push({current, top.key});
        continue;
      }
      if (current < min_frequency) break;  // the most frequent pair is too rare: so is every other
      const std::string& left = symbols_[left_of(top.key)];
      const std::string& right = symbols_[right_of(top.key)];
      // A piece spelled like an existing one (a special token, or an earlier merge reached another way: "ab c"
      // after "a bc") would make two vocabulary entries with one name: that pair is never merged.
      if (!taken_.insert(byte_level::to_symbols(left + right)).second) continue;
      merges.emplace_back(left, right);
      merge(top.key);
      if (progress) progress(static_cast<int>(merges.size()), wanted);
    }
    return merges;
  }

 private:
  struct HeapEntry {
    int64_t count;
    PairKey key;
  };
  // Lower priority: a smaller count; on equal counts, the pair whose (left, right) strings sort later.
  struct LowerPriority {
    const std::vector<std::string>* symbols;
    bool operator()(const HeapEntry& a, const HeapEntry& b) const {
      if (a.count != b.count) return a.count < b.count;
      const std::vector<std::string>& s = *symbols;
      const int by_left = s[left_of(a.key)].compare(s[left_of(b.key)]);
      if (by_left != 0) return by_left > 0;
      return s[right_of(a.key)].compare(s[right_of(b.key)]) > 0;
    }
  };

  // Replaces every occurrence of the pair by a new symbol in the words that hold it, updating the pair counts.
  void merge(PairKey key) {
    const int32_t left = left_of(key), right = right_of(key);
    const int32_t merged = static_cast<int32_t>(symbols_.size());
    symbols_.push_back(symbols_[left] + symbols_[right]);

    std::vector<int32_t> word_ids = std::move(pair_words_[key]);
    pair_words_.erase(key);
    // A word is listed once per occurrence, and words that lost the pair in an earlier merge stay listed.
    std::sort(word_ids.begin(), word_ids.end());
    word_ids.erase(std::unique(word_ids.begin(), word_ids.end()), word_ids.end());

    std::vector<PairKey> new_pairs;
    std::vector<int32_t> merged_word;
    for (int32_t w : word_ids) {
      std::vector<int32_t>& word = words_[w];
      merged_word.clear();
      for (size_t i = 0; i < word.size(); ++i) {
        if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
          merged_word.push_back(merged);
          ++i;
        } else {
          merged_word.push_back(word[i]);
        }
      }
      if (merged_word.size() == word.size()) continue;  // no longer holds the pair

      // Remove the word's old pairs and add its new ones; pairs it keeps cancel out.
      const int64_t count = word_counts_[w];
      for (size_t i = 0; i + 1 < word.size(); ++i) pair_counts_[pair_key(word[i], word[i + 1])] -= count;
      for (size_t i = 0; i + 1 < merged_word.size(); ++i) {
        const PairKey pair = pair_key(merged_word[i], merged_word[i + 1]);
        pair_counts_[pair] += count;
        if (merged_word[i] == merged || merged_word[i + 1] == merged) {
          pair_words_[pair].push_back(w);
          new_pairs.push_back(pair);
        }
      }
      word.swap(merged_word);
    }
    pair_counts_.erase(key);
    // Only the new pairs gained counts; the heap learns theirs now (the others are corrected when popped).
    std::sort(new_pairs.begin(), new_pairs.end());
    new_pairs.erase(std::unique(new_pairs.begin(), new_pairs.end()), new_pairs.end());
    for (PairKey pair : new_pairs) heap_.push({pair_counts_[pair], pair});
  }

  std::vector<std::string> symbols_;  // by symbol id, raw bytes
  std::unordered_set<std::string> taken_;  // every piece so far, spelled in byte-level symbols
  std::vector<std::vector<int32_t>> words_;  // each unique word as symbol ids
  std::vector<int64_t> word_counts_;
  std::unordered_map<PairKey, int64_t> pair_counts_;              // weighted by the word counts
  std::unordered_map<PairKey, std::vector<int32_t>> pair_words_;  // words that (may) hold the pair
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, LowerPriority> heap_{LowerPriority{&symbols_}};
};

void check_options(const BpeTrainerOptions& options) {
  const std::vector<std::string>& specials = options.special_tokens;
  const int minimum = 256 + static_cast<int>(specials.size());
  if (options.vocab_size < minimum) {
    throw Error("BPE training: vocab_size: expected at least 256 byte symbols + " + std::to_string(specials.size()) +
                " special tokens = " + std::to_string(minimum) + ", got " + std::to_string(options.vocab_size));
  }
  if (options.min_frequency < 1) {
    throw Error("BPE training: min_frequency: expected at least 1, got " + std::to_string(options.min_frequency));
  }
  std::unordered_set<std::string> seen;
  for (const std::string& special : specials) {
    const std::string got = "\"" + special + "\"";
    check(!special.empty(), "BPE training: special token: expected a non-empty string, got \"\"");
    for (size_t pos = 0; pos < special.size();) {
      const unicode::DecodedChar ch = unicode::decode_utf8(special, pos);
      if (ch.codepoint == unicode::kInvalidCodepoint) {
        throw Error("BPE training: special token: expected valid UTF-8 (tokenizer.json is UTF-8), got bytes that are not");
      }
      pos += ch.length;
    }
    check(seen.insert(special).second, "BPE training: special token: expected distinct tokens, got " + got + " twice");
    for (int b = 0; b < 256; ++b) {
      if (special == byte_level::symbol(static_cast<uint8_t>(b))) {
        throw Error("BPE training: special token: expected a string that is not one of the 256 byte symbols, got " + got);
      }
    }
  }
}

// ================================================================================================
// tokenizer.json
// ================================================================================================

// A JSON string literal (UTF-8 kept as is, as Hugging Face writes it).
std::string quote(const std::string& s) { return nlohmann::json(s).dump(-1, ' ', false); }

}  // namespace

std::vector<std::string> BpeVocabulary::pieces() const {
  std::vector<std::string> out = special_tokens;
  for (int b = 0; b < 256; ++b) out.push_back(byte_level::symbol(static_cast<uint8_t>(b)));
  for (const auto& [left, right] : merges) out.push_back(left + right);
  return out;
}

BpeVocabulary train_bpe(std::string_view text, const BpeTrainerOptions& options, const BpeProgress& progress) {
  check_options(options);
  check(!text.empty(), "BPE training: the corpus is empty");
  const WordCounts counts = count_words(text, options.special_tokens);
  const int wanted = options.vocab_size - 256 - static_cast<int>(options.special_tokens.size());

  BpeVocabulary vocab;
  vocab.special_tokens = options.special_tokens;
  BpeTrainer trainer(counts, options.special_tokens);
  for (auto& [left, right] : trainer.train(wanted, options.min_frequency, progress)) {
    vocab.merges.emplace_back(byte_level::to_symbols(left), byte_level::to_symbols(right));
  }
  return vocab;
}

std::string bpe_tokenizer_json(const BpeVocabulary& vocab) {
  // Written by hand rather than through a JSON object: the vocabulary stays in id order, one entry per line,
  // the layout Hugging Face writes, and thousands of entries cost nothing.
  const std::string byte_level = R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})";
  std::string out = "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [";
  for (size_t id = 0; id < vocab.special_tokens.size(); ++id) {
    out += id == 0 ? "\n" : ",\n";
    out += "    {\"id\": " + std::to_string(id) + ", \"content\": " + quote(vocab.special_tokens[id]) +
           ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}";
  }
  out += vocab.special_tokens.empty() ? "],\n" : "\n  ],\n";
  out += "  \"normalizer\": null,\n";
  out += "  \"pre_tokenizer\": " + byte_level + ",\n";
  out += "  \"post_processor\": null,\n";
  out += "  \"decoder\": " + byte_level + ",\n";
  out += "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
         "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n    \"fuse_unk\": false,\n"
         "    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \"vocab\": {";
  const std::vector<std::string> pieces = vocab.pieces();
  for (size_t id = 0; id < pieces.size(); ++id) {
    out += id == 0 ? "\n      " : ",\n      ";
    out += quote(pieces[id]) + ": " + std::to_string(id);
  }
  out += "\n    },\n    \"merges\": [";
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    out += i == 0 ? "\n      " : ",\n      ";
    out += quote(vocab.merges[i].first + " " + vocab.merges[i].second);
  }
  out += vocab.merges.empty() ? "]\n  }\n}\n" : "\n    ]\n  }\n}\n";
  return out;
}

std::string bpe_tokenizer_config_json(const BpeVocabulary& vocab) {
  const std::vector<std::string>& specials = vocab.special_tokens;
  const std::string bos = specials.empty() ? "null" : quote(specials[0]);
  const std::string eos = specials.empty() ? "null" : quote(specials.size() > 1 ? specials[1] : specials[0]);
  return "{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\",\n  \"bos_token\": " + bos + ",\n  \"eos_token\": " +
         eos + ",\n  \"clean_up_tokenization_spaces\": false\n}\n";
}

void save_bpe_tokenizer(const BpeVocabulary& vocab, const std::string& dir) {
  check(is_directory(dir), dir + ": expected an existing directory for tokenizer.json");
  write_file_atomically(dir + "/tokenizer.json", bpe_tokenizer_json(vocab));
  write_file_atomically(dir + "/tokenizer_config.json", bpe_tokenizer_config_json(vocab));
}

}  // namespace draftlab
