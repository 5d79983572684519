// SentencePiece BPE (the Llama-2 / Vicuna / TinyLlama vocabulary), from tokenizer.model or GGUF metadata.
//
// Encoding follows SentencePiece's bpe_model.cc (which llama.cpp's llm_tokenizer_spm mirrors):
//   1. normalise: optional whitespace cleanup, dummy-prefix " " for non-empty text, " " -> "▁"
//   2. split into UTF-8 characters (user-defined pieces are matched whole and never merged further)
//   3. repeatedly merge the adjacent pair whose concatenation is a vocabulary piece with the highest score
//      (ties: leftmost), using a priority queue of candidate pairs
//   4. emit each symbol's id; a symbol not in the vocabulary becomes byte tokens <0xXX> (byte fallback) or <unk>.
// Only normal, user-defined and unused pieces take part in merges, as in SentencePiece: text that happens to spell
// a control piece such as "<s>" is tokenized as text. (llama.cpp's merge lookup ignores piece types; for the
// Llama-2 vocabulary that makes no difference, as no chain of merges there spells a control or byte piece.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <queue>
#include <unordered_map>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/gguf.h"
#include "core/text/gguf_vocabulary.h"
#include "core/text/tokenizer.h"
#include "core/text/tokenizer_internal.h"

namespace draftlab {
namespace {

const char kSpaceMark[] = "\xE2\x96\x81";          // "▁" (U+2581), SentencePiece's visible space
const char kUnknownSurface[] = " \xE2\x81\x87 ";  // " ⁇ ", what SentencePiece decodes <unk> to

struct Piece {
  std::string text;
  float score = 0.0f;
  PieceType type = PieceType::kNormal;
};

// Normalisation switches (SentencePiece NormalizerSpec / GGUF tokenizer.ggml.* flags).
struct Normalization {
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = false;
  bool escape_whitespaces = true;
};

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    out.append(s.substr(pos, hit - pos));
    out.append(to);
  }
  out.append(s.substr(pos));
  return out;
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(std::string source, std::vector<Piece> pieces, int32_t bos, int32_t eos, int32_t unk,
                         Normalization norm);

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;

  std::string token_bytes(int32_t prev, int32_t id) const override {
    check_id(id);
    const std::string& surface = surface_[id];
    // The dummy prefix added by encode() shows up as the leading space of the first piece after BOS.
    if (prev >= 0 && prev == bos_ && norm_.add_dummy_prefix && !surface.empty() && surface[0] == ' ' &&
        pieces_[id].type != PieceType::kByte)
      return surface.substr(1);
    return surface;
  }

  const std::string& piece(int32_t id) const override {
    check_id(id);
    return pieces_[id].text;
  }
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  GgufVocabulary gguf_vocabulary() const override;

 private:
  void check_id(int32_t id) const {
    if (id < 0 || id >= vocab_size())
      throw Error::in_file(source_, "token id", "0.." + std::to_string(vocab_size() - 1), std::to_string(id));
  }
  std::string normalize(std::string_view text) const;
  // Length of the longest user-defined piece starting at text[pos], 0 if none.
  size_t match_user_defined(std::string_view text, size_t pos) const;
  // Appends the ids for one final symbol (SentencePiece's "resegment").
  void emit(std::string_view symbol, std::vector<int32_t>* out,
            const std::unordered_map<std::string, std::pair<std::string, std::string>>& unused_splits) const;

  std::string source_;
  std::vector<Piece> pieces_;
  std::vector<std::string> surface_;  // token_bytes without the after-BOS rule, precomputed per id
  int32_t bos_, eos_, unk_;
  Normalization norm_;
  // Views into pieces_[].text, which never changes after construction.
  PieceIndex mergeable_;  // normal, user-defined, unused: may result from merges
  PieceIndex any_piece_;  // every piece, for single symbols
  PieceIndex user_defined_;
  size_t longest_user_defined_ = 0;
  int32_t byte_ids_[256];  // -1 where the vocabulary has no <0xXX> piece
};

SentencePieceTokenizer::SentencePieceTokenizer(std::string source, std::vector<Piece> pieces, int32_t bos,
                                               int32_t eos, int32_t unk, Normalization norm)
    : source_(std::move(source)), pieces_(std::move(pieces)), bos_(bos), eos_(eos), unk_(unk), norm_(norm) {
  const int32_t n = static_cast<int32_t>(pieces_.size());
  if (n == 0) throw Error::in_file(source_, "pieces", "a non-empty vocabulary", "none");
  for (auto [name, id] : {std::pair<const char*, int32_t>{"bos id", bos_}, {"eos id", eos_}, {"unk id", unk_}})
    if (id < -1 || id >= n)
      throw Error::in_file(source_, name, "-1 (none) or 0.." + std::to_string(n - 1), std::to_string(id));

  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  // Most merge lookups miss; sparse buckets make a miss cheap (measured: encoding ~20% faster).
  for (PieceIndex* index : {&mergeable_, &any_piece_}) {
    index->max_load_factor(0.25f);
    index->reserve(n);
  }
  surface_.reserve(n);
  for (int32_t id = 0; id < n; ++id) {
    const Piece& p = pieces_[id];
    // Scores order the merge queue; a NaN would make that order meaningless.
    if (std::isnan(p.score)) throw Error::in_file(source_, "piece " + std::to_string(id) + " score", "a number", "NaN");
    any_piece_.emplace(p.text, id);  // first occurrence wins on duplicates
    switch (p.type) {
      case PieceType::kNormal:
      case PieceType::kUnused:
        mergeable_.emplace(p.text, id);
        break;
      case PieceType::kUserDefined:
        mergeable_.emplace(p.text, id);
        user_defined_.emplace(p.text, id);
        longest_user_defined_ = std::max(longest_user_defined_, p.text.size());
        break;
      case PieceType::kByte: {
        const int byte = parse_byte_piece(p.text);
        if (byte < 0) throw Error::in_file(source_, "piece " + std::to_string(id), "a byte piece <0xXX>", p.text);
        if (byte_ids_[byte] < 0) byte_ids_[byte] = id;
        break;
      }
      case PieceType::kUnknown:
      case PieceType::kControl:
        break;
      default:
        throw Error::in_file(source_, "piece " + std::to_string(id) + " type", "1-6",
                             std::to_string(static_cast<int>(p.type)));
    }
    if (p.type == PieceType::kControl)
      surface_.emplace_back();
    else if (p.type == PieceType::kUnknown)
      surface_.emplace_back(kUnknownSurface);
    else if (p.type == PieceType::kByte)
      surface_.emplace_back(1, static_cast<char>(parse_byte_piece(p.text)));
    else
      surface_.push_back(norm_.escape_whitespaces ? replace_all(p.text, kSpaceMark, " ") : p.text);
  }
}

GgufVocabulary SentencePieceTokenizer::gguf_vocabulary() const {
  // llama.cpp always writes spaces as "▁" in SentencePiece vocabularies; a model that keeps them has no GGUF form.
  if (!norm_.escape_whitespaces)
    throw Error::in_file(source_, "normalizer_spec.escape_whitespaces", "true (as llama.cpp assumes)", "false");
  GgufVocabulary v;
  v.model = "llama";
  for (const Piece& p : pieces_) {
    v.tokens.push_back(p.text);
    v.scores.push_back(p.score);
    v.token_types.push_back(static_cast<int32_t>(p.type));
  }
  v.bos_id = bos_;
  v.eos_id = eos_;
  v.unk_id = unk_;
  v.add_space_prefix = norm_.add_dummy_prefix;
  v.remove_extra_whitespaces = norm_.remove_extra_whitespaces;
  return v;
}

std::string SentencePieceTokenizer::normalize(std::string_view text) const {
  std::string s;
  if (norm_.remove_extra_whitespaces) {
    // Drop leading and trailing spaces, squeeze inner runs to one space (SentencePiece normalizer.cc).
    s.reserve(text.size());
    bool pending_space = false;
    for (char c : text) {
      if (c == ' ') {
        pending_space = !s.empty();
        continue;
      }
      if (pending_space) s.push_back(' ');
      pending_space = false;
      s.push_back(c);
    }
  } else {
    s.assign(text);
  }
  if (s.empty()) return s;
  if (norm_.add_dummy_prefix) s.insert(s.begin(), ' ');
  return norm_.escape_whitespaces ? replace_all(s, " ", kSpaceMark) : s;
}

size_t SentencePieceTokenizer::match_user_defined(std::string_view text, size_t pos) const {
  const size_t longest = std::min(longest_user_defined_, text.size() - pos);
  for (size_t len = longest; len > 0; --len)
    if (user_defined_.count(text.substr(pos, len))) return len;
  return 0;
}

void SentencePieceTokenizer::emit(
    std::string_view symbol, std::vector<int32_t>* out,
    const std::unordered_map<std::string, std::pair<std::string, std::string>>& unused_splits) const {
  auto it = any_piece_.find(symbol);
  if (it != any_piece_.end() && it->second != unk_ && pieces_[it->second].type != PieceType::kUnused) {
    out->push_back(it->second);
    return;
  }
  // An unused piece is a legal merge step but never an output: undo the merge that formed it.
  auto split = unused_splits.empty() ? unused_splits.end() : unused_splits.find(std::string(symbol));
  if (split != unused_splits.end()) {
    emit(split->second.first, out, unused_splits);
    emit(split->second.second, out, unused_splits);
    return;
  }
  // Not in the vocabulary: one byte token per byte when the vocabulary has them (byte fallback), else <unk>.
  bool all_bytes_known = true;
  for (unsigned char b : symbol) all_bytes_known = all_bytes_known && byte_ids_[b] >= 0;
  if (all_bytes_known) {
    for (unsigned char b : symbol) out->push_back(byte_ids_[b]);
    return;
  }
  if (unk_ < 0) throw Error::at(source_, "text needs <unk> or byte tokens, but the vocabulary has neither");
  // SentencePiece reports a run of unknown symbols as one <unk>.
  if (out->empty() || out->back() != unk_) out->push_back(unk_);
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> out;
  if (add_bos && bos_ >= 0) out.push_back(bos_);
  const std::string s = normalize(text);
  if (s.empty()) return out;

  // Initial symbols: spans of `s`, linked in a list so merges are O(1).
  struct Symbol {
    size_t start, size;  // size 0 = merged away
    int prev, next;
    bool frozen;  // user-defined pieces are never merged
  };
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = longest_user_defined_ ? match_user_defined(s, pos) : 0;
    const bool frozen = len > 0;
    if (!frozen) len = std::min(utf8_sequence_length(static_cast<uint8_t>(s[pos])), s.size() - pos);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({pos, len, index - 1, index + 1, frozen});
    pos += len;
  }
  symbols.back().next = -1;

  struct Candidate {
    float score;
    int left, right;
    uint32_t size;  // combined size when queued: a mismatch later means one side has changed
  };
  // Highest score first; ties go to the leftmost pair (SentencePiece's SymbolPairComparator).
  auto worse = [](const Candidate& a, const Candidate& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> queue(worse);
  std::unordered_map<std::string, std::pair<std::string, std::string>> unused_splits;
  const std::string_view text_view(s);
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0 || symbols[left].frozen || symbols[right].frozen) return;
    const std::string_view merged = text_view.substr(symbols[left].start, symbols[left].size + symbols[right].size);
    auto it = mergeable_.find(merged);
    if (it == mergeable_.end()) return;
    const Piece& piece = pieces_[it->second];
    queue.push({piece.score, left, right, static_cast<uint32_t>(merged.size())});
    if (piece.type == PieceType::kUnused)
      unused_splits[std::string(merged)] = {
          std::string(text_view.substr(symbols[left].start, symbols[left].size)),
          std::string(text_view.substr(symbols[right].start, symbols[right].size))};
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) consider(static_cast<int>(i), static_cast<int>(i) + 1);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    // Symbols only grow, and only the left one of a pair survives a merge, so equal sizes mean both are unchanged.
    if (left.size == 0 || right.size == 0 || left.size + right.size != c.size) continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }

  for (int i = 0; i >= 0; i = symbols[i].next)
    emit(text_view.substr(symbols[i].start, symbols[i].size), &out, unused_splits);
  return out;
}

// ---- tokenizer.model: a protobuf ModelProto, decoded by hand --------------------------------------------------

// Minimal protobuf wire-format reader, bounds-checked. Only what ModelProto needs: varints, fixed32,
// length-delimited fields, and skipping anything else.
class ProtoReader {
 public:
  enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

  ProtoReader(const std::string& path, const uint8_t* data, size_t size) : path_(path), p_(data), end_(data + size) {}

  bool at_end() const { return p_ == end_; }

  uint64_t varint(const std::string& what) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) fail(what, "a varint", "end of data (truncated)");
      const uint8_t b = *p_++;
      value |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return value;
    }
    fail(what, "a varint of at most 10 bytes", "a longer one");
  }
  // Field number and wire type of the next field.
  std::pair<uint32_t, int> tag(const std::string& what) {
    const uint64_t key = varint(what + " (field tag)");
    return {static_cast<uint32_t>(key >> 3), static_cast<int>(key & 7)};
  }
  float fixed32_float(const std::string& what) {
    if (end_ - p_ < 4) fail(what, "4 bytes (float)", std::to_string(end_ - p_) + " left (truncated)");
    float f;
    std::memcpy(&f, p_, 4);
    p_ += 4;
    return f;
  }
  // The bytes of a length-delimited field, as a sub-reader range.
  std::pair<const uint8_t*, size_t> bytes(const std::string& what) {
    const uint64_t len = varint(what + " (length)");
    if (len > static_cast<uint64_t>(end_ - p_))
      fail(what, std::to_string(len) + " bytes", std::to_string(end_ - p_) + " left (truncated)");
    const uint8_t* start = p_;
    p_ += len;
    return {start, static_cast<size_t>(len)};
  }
  std::string string(const std::string& what) {
    auto [data, size] = bytes(what);
    return std::string(reinterpret_cast<const char*>(data), size);
  }
  ProtoReader message(const std::string& what) {
    auto [data, size] = bytes(what);
    return ProtoReader(path_, data, size);
  }
  void skip(int wire_type, const std::string& what) {
    switch (wire_type) {
      case kVarint: varint(what); return;
      case kFixed64: advance(8, what); return;
      case kLengthDelimited: bytes(what); return;
      case kFixed32: advance(4, what); return;
      default: fail(what, "a protobuf wire type 0, 1, 2 or 5", std::to_string(wire_type));
    }
  }
  // Fails unless a known field arrived with the wire type its schema gives it.
  void expect(int wire_type, int expected, const std::string& what) const {
    if (wire_type != expected)
      fail(what, "wire type " + std::to_string(expected), "wire type " + std::to_string(wire_type));
  }
  [[noreturn]] void fail(const std::string& what, const std::string& expected, const std::string& got) const {
    throw Error::in_file(path_, what, expected, got);
  }

 private:
  void advance(size_t n, const std::string& what) {
    if (static_cast<size_t>(end_ - p_) < n)
      fail(what, std::to_string(n) + " bytes", std::to_string(end_ - p_) + " left (truncated)");
    p_ += n;
  }
  const std::string& path_;
  const uint8_t* p_;
  const uint8_t* end_;
};

// ModelProto.SentencePiece { 1: piece, 2: score, 3: type }
Piece read_piece(ProtoReader in, size_t index) {
  const std::string what = "pieces[" + std::to_string(index) + "]";
  Piece piece;
  while (!in.at_end()) {
    auto [field, wire] = in.tag(what);
    if (field == 1) {
      in.expect(wire, ProtoReader::kLengthDelimited, what + ".piece");
      piece.text = in.string(what + ".piece");
    } else if (field == 2) {
      in.expect(wire, ProtoReader::kFixed32, what + ".score");
      piece.score = in.fixed32_float(what + ".score");
    } else if (field == 3) {
      in.expect(wire, ProtoReader::kVarint, what + ".type");
      const uint64_t type = in.varint(what + ".type");
      if (type < 1 || type > 6) in.fail(what + ".type", "1-6 (normal..byte)", std::to_string(type));
      piece.type = static_cast<PieceType>(type);
    } else {
      in.skip(wire, what + " field " + std::to_string(field));
    }
  }
  return piece;
}

// The TrainerSpec fields that change how text is tokenized.
struct TrainerSettings {
  int64_t model_type = 1;  // proto default UNIGRAM
  int32_t unk_id = 0, bos_id = 1, eos_id = 2;
};

TrainerSettings read_trainer_spec(ProtoReader in) {
  TrainerSettings t;
  while (!in.at_end()) {
    auto [field, wire] = in.tag("trainer_spec");
    auto int_field = [&, wire = wire](const char* name) {
      in.expect(wire, ProtoReader::kVarint, std::string("trainer_spec.") + name);
      // int32 fields carry negative values (-1 = disabled) as 64-bit two's complement.
      return static_cast<int32_t>(static_cast<int64_t>(in.varint(std::string("trainer_spec.") + name)));
    };
    if (field == 3) t.model_type = int_field("model_type");
    else if (field == 40) t.unk_id = int_field("unk_id");
    else if (field == 41) t.bos_id = int_field("bos_id");
    else if (field == 42) t.eos_id = int_field("eos_id");
    else in.skip(wire, "trainer_spec field " + std::to_string(field));
  }
  return t;
}

Normalization read_normalizer_spec(ProtoReader in, const std::string& path) {
  Normalization n;
  n.remove_extra_whitespaces = true;  // proto defaults: every flag true
  std::string name;
  size_t charsmap_size = 0;
  while (!in.at_end()) {
    auto [field, wire] = in.tag("normalizer_spec");
    auto flag = [&, wire = wire](const char* what) {
      in.expect(wire, ProtoReader::kVarint, std::string("normalizer_spec.") + what);
      return in.varint(std::string("normalizer_spec.") + what) != 0;
    };
    if (field == 1) {
      in.expect(wire, ProtoReader::kLengthDelimited, "normalizer_spec.name");
      name = in.string("normalizer_spec.name");
    } else if (field == 2) {
      in.expect(wire, ProtoReader::kLengthDelimited, "normalizer_spec.precompiled_charsmap");
      charsmap_size = in.bytes("normalizer_spec.precompiled_charsmap").second;
    } else if (field == 3) {
      n.add_dummy_prefix = flag("add_dummy_prefix");
    } else if (field == 4) {
      n.remove_extra_whitespaces = flag("remove_extra_whitespaces");
    } else if (field == 5) {
      n.escape_whitespaces = flag("escape_whitespaces");
    } else {
      in.skip(wire, "normalizer_spec field " + std::to_string(field));
    }
  }
  // Unicode normalisation tables (nmt_nfkc and friends) are not implemented; silently skipping them would give
  // ids that differ from SentencePiece.
  if (charsmap_size != 0)
    throw Error::in_file(path, "normalizer_spec", "the \"identity\" normalizer (no precompiled_charsmap)",
                         "\"" + name + "\" with a " + std::to_string(charsmap_size) + "-byte charsmap");
  return n;
}

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece_model(const std::string& path) {
  FileBytes file(path);
  ProtoReader in(path, file.data(), file.size());
  std::vector<Piece> pieces;
  TrainerSettings trainer;
  Normalization norm;
  norm.remove_extra_whitespaces = true;  // the NormalizerSpec default, in case the message is absent
  while (!in.at_end()) {
    auto [field, wire] = in.tag("ModelProto");
    if (field == 1) {
      in.expect(wire, ProtoReader::kLengthDelimited, "pieces");
      pieces.push_back(read_piece(in.message("pieces[" + std::to_string(pieces.size()) + "]"), pieces.size()));
    } else if (field == 2) {
      in.expect(wire, ProtoReader::kLengthDelimited, "trainer_spec");
      trainer = read_trainer_spec(in.message("trainer_spec"));
    } else if (field == 3) {
      in.expect(wire, ProtoReader::kLengthDelimited, "normalizer_spec");
      norm = read_normalizer_spec(in.message("normalizer_spec"), path);
    } else {
      in.skip(wire, "ModelProto field " + std::to_string(field));
    }
  }
  constexpr int64_t kBpe = 2;
  if (trainer.model_type != kBpe)
    throw Error::in_file(path, "trainer_spec.model_type", "2 (BPE)",
                         std::to_string(trainer.model_type) + (trainer.model_type == 1 ? " (UNIGRAM)" : ""));
  return std::make_unique<SentencePieceTokenizer>(path, std::move(pieces), trainer.bos_id, trainer.eos_id,
                                                  trainer.unk_id, norm);
}

// ---- GGUF "llama" vocabularies ----------------------------------------------------------------------------------

namespace {
bool gguf_flag(const GgufFile& gguf, const std::string& key, bool fallback) {
  auto it = gguf.metadata.find(key);
  if (it == gguf.metadata.end()) return fallback;
  const bool* b = std::get_if<bool>(&it->second.v);
  if (!b) throw Error::in_file(gguf.path, key, "a bool", "another type");
  return *b;
}
int32_t gguf_token_id(const GgufFile& gguf, const std::string& key, int32_t fallback) {
  if (!gguf.has(key)) return fallback;
  const int64_t id = gguf.get_int(key);
  if (id < -1 || id > INT32_MAX) throw Error::in_file(gguf.path, key, "a token id", std::to_string(id));
  return static_cast<int32_t>(id);
}
}  // namespace

std::unique_ptr<Tokenizer> make_gguf_spm_tokenizer(const GgufFile& gguf) {
  const std::vector<std::string> tokens = gguf.get_string_array("tokenizer.ggml.tokens");
  // Scores and types are optional in llama.cpp (defaults: 0, normal).
  std::vector<double> scores;
  std::vector<int64_t> types;
  if (gguf.has("tokenizer.ggml.scores")) scores = gguf.get_float_array("tokenizer.ggml.scores");
  if (gguf.has("tokenizer.ggml.token_type")) types = gguf.get_int_array("tokenizer.ggml.token_type");
  if (!scores.empty() && scores.size() != tokens.size())
    throw Error::in_file(gguf.path, "tokenizer.ggml.scores", std::to_string(tokens.size()) + " scores (one per token)",
                         std::to_string(scores.size()));
  if (!types.empty() && types.size() != tokens.size())
    throw Error::in_file(gguf.path, "tokenizer.ggml.token_type",
                         std::to_string(tokens.size()) + " types (one per token)", std::to_string(types.size()));

  std::vector<Piece> pieces(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    pieces[i].text = tokens[i];
    if (!scores.empty()) pieces[i].score = static_cast<float>(scores[i]);
    if (!types.empty()) {
      if (types[i] < 1 || types[i] > 6)
        throw Error::in_file(gguf.path, "tokenizer.ggml.token_type[" + std::to_string(i) + "]", "1-6",
                             std::to_string(types[i]));
      pieces[i].type = static_cast<PieceType>(types[i]);
    }
  }
  Normalization norm;
  norm.add_dummy_prefix = gguf_flag(gguf, "tokenizer.ggml.add_space_prefix", true);
  norm.remove_extra_whitespaces = gguf_flag(gguf, "tokenizer.ggml.remove_extra_whitespaces", false);
  // llama.cpp's defaults for SentencePiece vocabularies: unk 0, bos 1, eos 2.
  return std::make_unique<SentencePieceTokenizer>(gguf.path, std::move(pieces),
                                                  gguf_token_id(gguf, "tokenizer.ggml.bos_token_id", 1),
                                                  gguf_token_id(gguf, "tokenizer.ggml.eos_token_id", 2),
                                                  gguf_token_id(gguf, "tokenizer.ggml.unknown_token_id", 0), norm);
}

}  // namespace draftlab
