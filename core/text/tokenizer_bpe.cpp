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
// The front-ends fill a BpeSpec from a GGUF file (tokenizer_bpe_gguf.cpp) or a tokenizer.json
// (tokenizer_bpe_json.cpp); the pre-tokenizer's split patterns and byte-level alphabet are in
// tokenizer_bpe_pretokenizer.cpp.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <mutex>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/base/error.h"
#include "core/text/byte_level.h"
#include "core/text/tokenizer_bpe_internal.h"
#include "core/text/tokenizer_internal.h"
#include "core/text/unicode_categories.h"

namespace draftlab {
namespace {

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

}  // namespace

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
      const std::string& symbol = byte_level::symbol(static_cast<uint8_t>(b));
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

}  // namespace draftlab
