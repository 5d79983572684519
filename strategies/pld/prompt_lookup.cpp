// pld: prompt lookup decoding (Saxena 2023; Hugging Face transformers' prompt_lookup_num_tokens).
//
// Text often repeats itself (code edits, summaries quoting their source, a small model looping). So: take the
// last n tokens of the sequence, find their most recent earlier occurrence, and propose the tokens that followed
// it as a chain. Longer n-grams are tried first (n = max_ngram down to min_ngram): a longer match is better
// evidence. Drafts are deterministic (point masses for the verifier) with confidence 1.
//
// Differences from Hugging Face, on purpose:
//   * the most recent occurrence is used, not the earliest: recent context predicts better and this is what
//     the n-gram index below gives in O(1);
//   * when the occurrence is so recent that its continuation runs into the end of the sequence, the
//     continuation keeps copying from the draft itself, i.e. it repeats the period it found (after "a b c a b"
//     the last "a b" occurred at 0, so the draft is "c a b c ..."), instead of stopping short.
//
// Cost: an index from each n-gram to where its most recent occurrence ended, extended with only the tokens
// added since the last proposal: O(new tokens * ngram sizes) per proposal, independent of the length.
#include "strategies/pld/prompt_lookup.h"
#include "strategies/registry.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/base/error.h"

namespace draftlab {

namespace {

using NGram = std::vector<int64_t>;

struct NGramHash {
  size_t operator()(const NGram& g) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the token ids
    for (int64_t t : g) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

class PromptLookupStrategy : public SequenceStrategy {
 public:
  PromptLookupStrategy(int64_t min_ngram, int64_t max_ngram, int64_t num_tokens)
      : min_ngram_(min_ngram), max_ngram_(max_ngram), num_tokens_(num_tokens) {
    reset();
  }

  std::string name() const override { return "pld"; }

  void begin(const std::vector<int64_t>&, const at::Tensor&, int64_t) override { reset(); }

  DraftTree propose(const DraftRequest& request) override {
    const std::vector<int64_t>& seq = request.sequence;
    const auto length = static_cast<int64_t>(seq.size());
    const int64_t budget = std::min<int64_t>({num_tokens_, request.max_nodes, request.tokens_wanted});
    if (budget <= 0) return {};
    update_index(seq);
    const int64_t start = find_continuation(seq);
    if (start < 0) return {};

    // Copy what followed the match; past the end of the sequence, continue from the draft itself (start <
    // length, so position start + i - length of the draft always exists already).
    std::vector<int64_t> draft;
    DraftTree tree;
    int32_t parent = -1;
    for (int64_t pos = start; pos < start + budget; ++pos) {
      const int64_t token = pos < length ? seq[pos] : draft[pos - length];
      draft.push_back(token);
      parent = tree.add(token, parent);
    }
    return tree;
  }

  // Nothing to learn from the verification: the next request's sequence carries the accepted tokens.
  void observe(const VerifyResult&) override {}

 private:
  void reset() {
    index_.assign(max_ngram_ - min_ngram_ + 1, {});
    indexed_end_ = 0;
  }

  // Records every n-gram that ends before the last token (so it has a continuation) and was not recorded yet.
  // Each entry maps the n-gram to the position right after its most recent occurrence.
  void update_index(const std::vector<int64_t>& seq) {
    const auto last = static_cast<int64_t>(seq.size()) - 1;  // n-grams must end at or before here (exclusive)
    if (last < indexed_end_) reset();                       // a shorter sequence: a new one, start over
    for (int64_t end = indexed_end_ + 1; end <= last; ++end)
      for (int64_t n = min_ngram_; n <= max_ngram_ && n <= end; ++n)
        index_[n - min_ngram_][NGram(seq.begin() + (end - n), seq.begin() + end)] = end;
    indexed_end_ = std::max(indexed_end_, last);
  }

  // Position of the first token after the most recent earlier occurrence of the longest matching suffix n-gram,
  // or -1 when no suffix of min_ngram..max_ngram tokens occurred before.
  int64_t find_continuation(const std::vector<int64_t>& seq) const {
    const auto length = static_cast<int64_t>(seq.size());
    for (int64_t n = std::min(max_ngram_, length - 1); n >= min_ngram_; --n) {
      const NGram suffix(seq.end() - n, seq.end());
      const auto& table = index_[n - min_ngram_];
      auto it = table.find(suffix);
      if (it == table.end()) continue;
      const int64_t end = it->second;
      // Cheap guard against an index built from a different sequence of equal or greater length.
      if (end < length && std::equal(suffix.begin(), suffix.end(), seq.begin() + (end - n))) return end;
    }
    return -1;
  }

  int64_t min_ngram_, max_ngram_, num_tokens_;
  std::vector<std::unordered_map<NGram, int64_t, NGramHash>> index_;  // one table per n, from min_ngram up
  int64_t indexed_end_ = 0;  // n-grams ending (exclusive) at positions <= this are in the index
};

}  // namespace

const StrategyDescriptor& prompt_lookup_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "pld";
    d.summary = "prompt lookup, no model: copy what followed the latest earlier occurrence of the last n-gram";
    d.needs = StrategyNeeds::Nothing;
    d.shape = DraftShape::Chain;
    d.has_confidence = false;  // copied tokens have no draft probability
    d.options = {integer_option("max_ngram", 3, 1, 64, "longest n-gram looked up (tried first)"),
                 integer_option("min_ngram", 1, 1, 64, "shortest n-gram looked up"),
                 integer_option("num_tokens", 10, 1, 1024, "tokens copied per cycle at most")};
    d.test_variants = {{"pld", {}}};
    d.make = [](const StrategyContext&, const StrategyOptions& options) -> std::unique_ptr<DraftStrategy> {
      const int64_t max_ngram = options.get_int("max_ngram"), min_ngram = options.get_int("min_ngram");
      if (max_ngram < min_ngram)
        throw Error("strategy pld: option max_ngram: expected >= min_ngram (" + std::to_string(min_ngram) +
                    "), got " + std::to_string(max_ngram));
      return std::make_unique<PromptLookupStrategy>(min_ngram, max_ngram, options.get_int("num_tokens"));
    };
    return d;
  }();
  return d;
}

const DraftFamily& pld_family() {
  static const DraftFamily f{"pld", {&prompt_lookup_strategy()}};
  return f;
}

}  // namespace draftlab
