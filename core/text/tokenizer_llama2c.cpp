// llama2.c tokenizer.bin: the vocabulary format of Karpathy's run.c, and run.c's encoder and decoder.
//
// File: int32 max_token_length, then per token { float32 score, int32 byte length, bytes }.
// Conventions of run.c: id 0 = <unk>, 1 = BOS ("\n<s>\n"), 2 = EOS ("\n</s>\n"), ids 3..258 = byte tokens
// "<0x00>".."<0xFF>", and SentencePiece's "▁" already replaced by a plain space.
//
// encode() reproduces run.c's encode() id for id: dummy-prefix " ", one symbol per UTF-8 code point (or per byte
// when the code point is not in the vocabulary), then repeatedly merge the adjacent pair whose concatenation is the
// best-scoring vocabulary entry (ties: leftmost). run.c rescans all pairs for every merge (O(n^2)); here candidate
// pairs wait in a priority queue, which picks the same pair each step.
#include <cstring>
#include <queue>
#include <unordered_map>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/text/gguf_vocabulary.h"
#include "core/text/tokenizer.h"
#include "core/text/tokenizer_internal.h"

namespace draftlab {
namespace {

constexpr int32_t kBos = 1;  // run.c hard-codes these ids
constexpr int32_t kEos = 2;
constexpr int32_t kFirstByteToken = 3;
// run.c starts its search for the best merge at this score, so pairs scoring at or below it never merge.
constexpr float kNoMergeScore = -1e10f;

class Llama2cTokenizer final : public Tokenizer {
 public:
  Llama2cTokenizer(std::string path, std::vector<std::string> pieces, std::vector<float> scores)
      : path_(std::move(path)), pieces_(std::move(pieces)), scores_(std::move(scores)) {
    // Most merge lookups miss; sparse buckets make a miss cheap.
    lookup_.max_load_factor(0.25f);
    lookup_.reserve(pieces_.size());
    // Duplicates would make run.c's bsearch pick an arbitrary one; the lowest id is the deterministic choice.
    for (size_t id = 0; id < pieces_.size(); ++id) lookup_.emplace(pieces_[id], static_cast<int32_t>(id));
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;

  std::string token_bytes(int32_t prev, int32_t id) const override {
    check_id(id);
    if (id == bos_id() || id == eos_id()) return "";
    std::string_view piece = pieces_[id];
    // run.c: after BOS, the leading space of the first piece (the dummy prefix) is not printed.
    if (prev == kBos && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
    const int byte = parse_byte_piece(piece);
    if (byte >= 0) return std::string(1, static_cast<char>(byte));
    return std::string(piece);
  }

  const std::string& piece(int32_t id) const override {
    check_id(id);
    return pieces_[id];
  }
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  int32_t bos_id() const override { return vocab_size() > kBos ? kBos : -1; }
  int32_t eos_id() const override { return vocab_size() > kEos ? kEos : -1; }
  GgufVocabulary gguf_vocabulary() const override;

 private:
  void check_id(int32_t id) const {
    if (id < 0 || id >= vocab_size())
      throw Error::in_file(path_, "token id", "0.." + std::to_string(vocab_size() - 1), std::to_string(id));
  }
  int32_t find(const std::string& s) const {
    auto it = lookup_.find(s);
    return it == lookup_.end() ? -1 : it->second;
  }
  // One UTF-8 code point (or lone byte) as run.c maps it: its vocabulary entry, else one byte token per byte.
  void append_symbol(const std::string& bytes, std::vector<int32_t>* ids) const;

  std::string path_;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  PieceIndex lookup_;  // views into pieces_, which never changes
};

// As llama.cpp's convert-llama2c-to-ggml: run.c's encoder is SentencePiece BPE with the dummy prefix, so the
// pieces become a "llama" vocabulary once spaces are written "▁" and the special ids are named and typed.
GgufVocabulary Llama2cTokenizer::gguf_vocabulary() const {
  constexpr int32_t kUnk = 0;
  GgufVocabulary v;
  v.model = "llama";
  v.add_space_prefix = true;
  for (int32_t id = 0; id < vocab_size(); ++id) {
    std::string text = pieces_[id];
    PieceType type = PieceType::kNormal;
    if (id == kUnk) {
      text = "<unk>";
      type = PieceType::kUnknown;
    } else if (id == kBos || id == kEos) {
      text = id == kBos ? "<s>" : "</s>";
      type = PieceType::kControl;
    } else if (text.empty()) {
      type = PieceType::kControl;
    } else if (parse_byte_piece(text) >= 0) {
      type = PieceType::kByte;
    } else {
      std::string escaped;
      for (char c : text) escaped += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
      text = escaped;
    }
    v.tokens.push_back(std::move(text));
    v.scores.push_back(scores_[id]);
    v.token_types.push_back(static_cast<int32_t>(type));
  }
  v.unk_id = vocab_size() > kUnk ? kUnk : -1;
  v.bos_id = bos_id();
  v.eos_id = eos_id();
  return v;
}

void Llama2cTokenizer::append_symbol(const std::string& bytes, std::vector<int32_t>* ids) const {
  const int32_t id = find(bytes);
  if (id >= 0) {
    ids->push_back(id);
    return;
  }
  for (unsigned char b : bytes) {
    const int32_t byte_id = kFirstByteToken + b;
    if (byte_id >= vocab_size())
      throw Error::in_file(path_, "byte fallback", "byte tokens at ids 3..258 (vocabulary of at least 259)",
                           "a vocabulary of " + std::to_string(vocab_size()) + " lacking token " +
                               std::to_string(byte_id));
    ids->push_back(byte_id);
  }
}

std::vector<int32_t> Llama2cTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> ids;
  if (add_bos && bos_id() >= 0) ids.push_back(bos_id());
  // run.c always adds the dummy prefix for non-empty text. (run.c would index vocab[-1] if " " were missing;
  // here it falls back to a byte token like any other character.)
  if (!text.empty()) append_symbol(" ", &ids);

  // Split into code points the way run.c does: a lead byte starts a new symbol; up to 3 continuation bytes
  // join it; a code point missing from the vocabulary becomes its bytes.
  std::string code_point;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) code_point.clear();
    code_point.push_back(static_cast<char>(c));
    const bool next_continues = i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80;
    if (next_continues && code_point.size() < 4) continue;
    append_symbol(code_point, &ids);
    code_point.clear();
  }

  // Merge phase. Symbols form a doubly linked list over `ids`; a merged-away symbol gets id -1.
  const int n = static_cast<int>(ids.size());
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    float score;
    int left, right;            // symbol positions
    int32_t left_id, right_id;  // ids when queued: if either symbol changed since, the candidate is stale
    int32_t merged_id;
  };
  // Highest score first; among equal scores the leftmost, as run.c's strict '>' scan picks.
  auto worse = [](const Candidate& a, const Candidate& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> queue(worse);
  std::string joined;
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    joined = pieces_[ids[left]];
    joined += pieces_[ids[right]];
    const int32_t merged = find(joined);
    // `score > kNoMergeScore` is false for NaN too, exactly as in run.c.
    if (merged >= 0 && scores_[merged] > kNoMergeScore)
      queue.push({scores_[merged], left, right, ids[left], ids[right], merged});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    if (ids[c.left] != c.left_id || ids[c.right] != c.right_id || next[c.left] != c.right) continue;
    ids[c.left] = c.merged_id;
    ids[c.right] = -1;
    next[c.left] = next[c.right];
    if (next[c.left] >= 0) prev[next[c.left]] = c.left;
    consider(prev[c.left], c.left);
    consider(c.left, next[c.left]);
  }

  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (int i = n > 0 ? 0 : -1; i >= 0; i = next[i]) out.push_back(ids[i]);
  return out;
}

// Bounds-checked little-endian reads over the mapped file.
class Reader {
 public:
  explicit Reader(const FileBytes& f) : f_(f) {}
  bool at_end() const { return pos_ == f_.size(); }
  size_t remaining() const { return f_.size() - pos_; }

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, f_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_bytes(size_t n, const std::string& what) {
    need(n, what);
    std::string s(reinterpret_cast<const char*>(f_.data() + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  void need(size_t n, const std::string& what) const {
    if (n > remaining())
      throw Error::in_file(f_.path(), what, std::to_string(n) + " bytes at offset " + std::to_string(pos_),
                           "end of file at " + std::to_string(f_.size()) + " (file truncated?)");
  }
  const FileBytes& f_;
  size_t pos_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path, int32_t vocab_size) {
  if (vocab_size < -1 || vocab_size == 0)
    throw Error::in_file(path, "vocab_size argument", "-1 (whole file) or a positive count", std::to_string(vocab_size));
  FileBytes file(path);
  Reader in(file);
  const int32_t max_token_length = in.read<int32_t>("max_token_length");
  if (max_token_length <= 0)
    throw Error::in_file(path, "max_token_length", "a positive length", std::to_string(max_token_length));

  std::vector<std::string> pieces;
  std::vector<float> scores;
  // Each entry takes at least 8 bytes, so this bounds the reservation by the file, not by a lying argument.
  if (vocab_size > 0) {
    if (static_cast<size_t>(vocab_size) > in.remaining() / 8)
      throw Error::in_file(path, "vocabulary", std::to_string(vocab_size) + " tokens (vocab_size of the model)",
                           "a file of " + std::to_string(file.size()) + " bytes, too short for that many");
    pieces.reserve(vocab_size);
    scores.reserve(vocab_size);
  }
  while (vocab_size < 0 ? !in.at_end() : static_cast<int32_t>(pieces.size()) < vocab_size) {
    const std::string what = "token " + std::to_string(pieces.size());
    const float score = in.read<float>(what + " score");
    const int32_t length = in.read<int32_t>(what + " length");
    if (length < 0 || length > max_token_length)
      throw Error::in_file(path, what + " length", "0.." + std::to_string(max_token_length) + " (max_token_length)",
                           std::to_string(length));
    pieces.push_back(in.read_bytes(static_cast<size_t>(length), what + " bytes"));
    scores.push_back(score);
  }
  if (!in.at_end())
    throw Error::in_file(path, "vocabulary", "exactly " + std::to_string(vocab_size) + " tokens (vocab_size of the model)",
                         std::to_string(in.remaining()) + " bytes left after them (a different vocabulary?)");
  if (pieces.empty()) throw Error::in_file(path, "vocabulary", "at least one token", "none");
  return std::make_unique<Llama2cTokenizer>(path, std::move(pieces), std::move(scores));
}

}  // namespace draftlab
