// The suffix strategy (SuffixDecoding) on its own: its trees against a brute-force count over the sequence (the
// pattern, each node's frequency estimate, best-first order within the budget), and the global trie of earlier
// outputs. (That decoding with it is lossless is tested for every strategy in test_lossless_*.)
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "model/model_fixtures.h"
#include "strategies/registry.h"

using namespace draftlab;

namespace {

std::unique_ptr<DraftStrategy> suffix(const LlamaModel& target, std::vector<std::string> options) {
  return make_strategy("suffix", StrategyContext{target}, StrategyOptions::parse(options));
}

// How often `needle` occurs in `text` starting at one of `starts`, inside the text and within `depth` tokens.
int64_t occurrences(const std::vector<int64_t>& text, const std::vector<int64_t>& needle, int64_t depth) {
  int64_t n = 0;
  if (static_cast<int64_t>(needle.size()) > depth) return 0;
  for (size_t i = 0; i + needle.size() <= text.size(); ++i)
    if (std::equal(needle.begin(), needle.end(), text.begin() + static_cast<std::ptrdiff_t>(i))) ++n;
  return n;
}

// Two settings: a tight budget (best-first order decides), and a threshold that binds (the estimates' exact values
// decide: count(pattern) includes the pattern's own last occurrence, which has no continuation).
struct SuffixSetting {
  double factor, min_prob;
};
class SuffixTrees : public ::testing::TestWithParam<SuffixSetting> {};

TEST_P(SuffixTrees, AreTheMostFrequentContinuationsOfTheLongestPattern) {
  const auto target = draftlab::testing::tiny_model();
  Sampler sampler{SamplingParams{}};
  std::mt19937 rng(7);
  const int64_t depth = 6;
  const double factor = GetParam().factor, min_prob = GetParam().min_prob;
  int trees = 0, branched = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int64_t> seq;
    for (int i = 0; i < 80; ++i) seq.push_back(std::uniform_int_distribution<int64_t>(0, 3)(rng));
    auto s = suffix(*target, {"max_tree_depth=6", "max_spec_factor=" + std::to_string(factor),
                              "min_token_prob=" + std::to_string(min_prob), "max_cached_requests=0"});
    s->begin(seq, {}, 0);  // (a strategy without a model reads neither features nor capacity)
    const DraftTree tree = propose_one(*s, DraftRequest{seq, 1000, 1000, sampler});
    // The pattern: the longest suffix (< depth tokens) that occurred before with a token after it.
    int64_t length = 0;
    for (int64_t l = std::min<int64_t>(depth - 1, static_cast<int64_t>(seq.size())); l >= 1 && length == 0; --l) {
      const std::vector<int64_t> pattern(seq.end() - l, seq.end());
      for (size_t i = 0; i + l < seq.size(); ++i)
        if (std::equal(pattern.begin(), pattern.end(), seq.begin() + static_cast<std::ptrdiff_t>(i))) length = l;
    }
    ASSERT_GT(length, 0);
    const std::vector<int64_t> pattern(seq.end() - length, seq.end());
    const double base = static_cast<double>(occurrences(seq, pattern, depth));
    auto probability = [&](const std::vector<int64_t>& path) {
      std::vector<int64_t> p = pattern;
      p.insert(p.end(), path.begin(), path.end());
      return static_cast<double>(occurrences(seq, p, depth)) / base;
    };
    // Every node: within the budget, its path's brute-force probability at least min_prob.
    ASSERT_LE(tree.size(), static_cast<int32_t>(factor * static_cast<double>(length)));
    std::vector<std::vector<int64_t>> paths(tree.size());
    double lowest = 1;
    for (int32_t i = 0; i < tree.size(); ++i) {
      const DraftNode& n = tree.node(i);
      if (n.parent >= 0) paths[i] = paths[n.parent];
      paths[i].push_back(n.token);
      const double p = probability(paths[i]);
      EXPECT_GE(p, min_prob) << "trial " << trial << " node " << i;
      EXPECT_LE(static_cast<int64_t>(paths[i].size()) + length, depth);
      lowest = std::min(lowest, p);
    }
    // Best first: no continuation left out (of the root or of a node) is more likely than a node kept, unless the
    // budget was full or it was below min_prob.
    const bool full = tree.size() == static_cast<int32_t>(factor * static_cast<double>(length));
    std::vector<std::vector<int64_t>> frontier{{}};
    for (const auto& p : paths) frontier.push_back(p);
    for (const auto& prefix : frontier) {
      if (static_cast<int64_t>(prefix.size()) + length >= depth) continue;
      for (int64_t t = 0; t < 4; ++t) {
        std::vector<int64_t> path = prefix;
        path.push_back(t);
        if (std::find(paths.begin(), paths.end(), path) != paths.end()) continue;
        const double p = probability(path);
        if (p < min_prob) continue;
        EXPECT_TRUE(full) << "trial " << trial << ": a continuation of probability " << p << " left out of a tree with room";
        EXPECT_LE(p, lowest + 1e-12) << "trial " << trial << ": left out a continuation likelier than a node kept";
      }
    }
    trees += tree.size() > 0;
    for (int32_t i = 0; i < tree.size(); ++i) branched += tree.node(i).sibling_rank > 0;
  }
  EXPECT_GT(trees, 30);
  EXPECT_GT(branched, 0) << "no tree had two children anywhere: the test saw only chains";
}
INSTANTIATE_TEST_SUITE_P(SuffixDecoding, SuffixTrees,
                         ::testing::Values(SuffixSetting{3, 0.05}, SuffixSetting{50, 0.3}));

TEST(SuffixDecoding, EarlierOutputsDraftForTheNextRequest) {
  const auto target = draftlab::testing::tiny_model();
  Sampler sampler{SamplingParams{}};
  auto s = suffix(*target, {});
  // Request 1: prompt {1, 2}, then an output 10 11 12 13 14 15 that the next prompt repeats the start of.
  const std::vector<int64_t> first{1, 2, 10, 11, 12, 13, 14, 15};
  s->begin({1, 2}, {}, 0);
  propose_one(*s, DraftRequest{first, 100, 100, sampler});
  // Request 2 ends with 10 11 12: only the earlier output knows what followed.
  const std::vector<int64_t> second{3, 4, 10, 11, 12};
  s->begin({3, 4, 10, 11, 12}, {}, 0);
  const DraftTree tree = propose_one(*s, DraftRequest{second, 100, 100, sampler});
  ASSERT_GE(tree.size(), 1);
  EXPECT_EQ(tree.node(0).token, 13);
  // Without the global trie nothing matches.
  auto alone = suffix(*target, {"max_cached_requests=0"});
  alone->begin({1, 2}, {}, 0);
  propose_one(*alone, DraftRequest{first, 100, 100, sampler});
  alone->begin({3, 4, 10, 11, 12}, {}, 0);
  EXPECT_EQ(propose_one(*alone, DraftRequest{second, 100, 100, sampler}).size(), 0);
  // The same prompt again (a benchmark's repeat) does not see its own earlier output: only the other request's.
  auto repeat = suffix(*target, {});
  const std::vector<int64_t> answer{5, 6, 20, 21, 22, 23, 20, 21};
  repeat->begin({5, 6}, {}, 0);
  propose_one(*repeat, DraftRequest{answer, 100, 100, sampler});
  repeat->begin({5, 6}, {}, 0);
  EXPECT_EQ(propose_one(*repeat, DraftRequest{{5, 6, 20, 21}, 100, 100, sampler}).size(), 0)
      << "a repeated prompt drafted from its own earlier answer";
  repeat->begin({7, 8}, {}, 0);  // the repeat's output (up to 20 21) is cached now, under another prompt
  const DraftTree other = propose_one(*repeat, DraftRequest{{7, 8, 20}, 100, 100, sampler});
  ASSERT_GE(other.size(), 1);
  EXPECT_EQ(other.node(0).token, 21);
}

}  // namespace
