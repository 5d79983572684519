// Lookahead decoding's bookkeeping against examples worked by hand (the n-gram pool's LRU, the window's rows,
// warm-up, n-gram harvest and shift, the guess trie, the strategy's proposals through make_strategy), the window's
// attention pattern against its meaning (each cell's logits equal a separate forward of the sequence root, level 0
// up to its column, its column's cells above it), and the official setting's rules: the first Jacobi step in the
// prefill forward, no bonus after a full n-gram.
#include <gtest/gtest.h>

#include "core/decoding/speculative_decoder.h"
#include "core/decoding/vanilla_decoder.h"
#include "core/decoding/verifier.h"
#include "model/model_fixtures.h"
#include "strategies/lookahead/lookahead.h"
#include "test_errors.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

std::vector<std::vector<int64_t>> all_continuations(const NGramPool& pool, int64_t key) {
  const auto& flat = pool.continuations(key);
  const int32_t L = pool.continuation_length();
  std::vector<std::vector<int64_t>> out;
  for (size_t at = 0; at < flat.size(); at += L) out.emplace_back(flat.begin() + at, flat.begin() + at + L);
  return out;
}

TEST(NGramPool, KeepsTheNewestPerKeyAndRefreshesRepeats) {
  NGramPool pool(3, 2);
  const int64_t a[] = {1, 2}, b[] = {3, 4}, c[] = {7, 8};
  pool.add(5, a);
  pool.add(5, b);
  EXPECT_EQ(all_continuations(pool, 5), (std::vector<std::vector<int64_t>>{{1, 2}, {3, 4}}));
  pool.add(5, a);  // already there: becomes the newest
  EXPECT_EQ(all_continuations(pool, 5), (std::vector<std::vector<int64_t>>{{3, 4}, {1, 2}}));
  pool.add(5, c);  // full: the oldest ({3, 4}) goes
  EXPECT_EQ(all_continuations(pool, 5), (std::vector<std::vector<int64_t>>{{1, 2}, {7, 8}}));
  pool.add(6, b);
  EXPECT_EQ(all_continuations(pool, 6), (std::vector<std::vector<int64_t>>{{3, 4}}));
  EXPECT_TRUE(pool.continuations(9).empty());
  EXPECT_EQ(pool.keys(), 2u);
}

struct Row {
  int64_t token;
  int32_t depth;
  std::vector<int32_t> sees;
};

std::vector<Row> rows_of(const LookaheadWindow& w) {
  DraftTree t;
  w.add_rows(t);
  EXPECT_EQ(t.extra_size(), w.rows());
  EXPECT_EQ(t.size(), 0);
  std::vector<Row> rows;
  for (const ExtraRow& e : t.extra_rows()) {
    EXPECT_TRUE(e.sees_nodes.empty());
    rows.push_back({e.token, e.depth, e.sees_rows});
  }
  return rows;
}

void expect_rows(const std::vector<Row>& got, const std::vector<Row>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token, want[i].token) << "row " << i;
    EXPECT_EQ(got[i].depth, want[i].depth) << "row " << i;
    EXPECT_EQ(got[i].sees, want[i].sees) << "row " << i;
  }
}

// W = 3, N = 4 from reset to a full window and one full step, every state worked out by hand (cell (l, c) sits at
// depth l + c; level 0 holds columns 1.., the root being column 0).
TEST(LookaheadWindow, WarmUpHarvestAndShiftWorkedByHand) {
  LookaheadWindow w(3, 4);
  expect_error([&] { w.reset({1, 2}); }, {"expected 4 tokens"});
  w.reset({10, 11, 12, 13});  // W + N - 3 = 4
  EXPECT_EQ(w.filled_levels(), 1);
  expect_rows(rows_of(w), {{10, 1, {}}, {11, 2, {0}}, {12, 3, {0, 1}}, {13, 4, {0, 1, 2}}});

  NGramPool pool(4, 8);
  const int64_t step1[] = {20, 21, 22, 23};
  w.advance(99, step1, pool);  // warm-up: level 0 loses its first cell, level 1 = the argmaxes of columns 1..4
  EXPECT_EQ(w.level(0), (std::vector<int64_t>{11, 12, 13}));
  EXPECT_EQ(w.level(1), (std::vector<int64_t>{20, 21, 22, 23}));
  EXPECT_EQ(pool.keys(), 0u) << "no n-grams while warming up";
  // Level 0: rows 0-2 (columns 1-3); level 1: rows 3-6 (columns 0-3), each seeing level 0 up to its column.
  expect_rows(rows_of(w), {{11, 1, {}}, {12, 2, {0}}, {13, 3, {0, 1}},
                           {20, 1, {}}, {21, 2, {0}}, {22, 3, {0, 1}}, {23, 4, {0, 1, 2}}});

  const int64_t step2[] = {30, 31, 32, 33, 34, 35, 36};
  w.advance(99, step2, pool);  // the deepest level (rows 3-6) from column 1 on: rows 4-6
  ASSERT_TRUE(w.full());
  EXPECT_EQ(w.level(0), (std::vector<int64_t>{12, 13}));
  EXPECT_EQ(w.level(1), (std::vector<int64_t>{21, 22, 23}));
  EXPECT_EQ(w.level(2), (std::vector<int64_t>{34, 35, 36}));
  EXPECT_EQ(pool.keys(), 0u);
  expect_rows(rows_of(w), {{12, 1, {}}, {13, 2, {0}},                    // level 0, columns 1-2
                           {21, 1, {}}, {22, 2, {0}}, {23, 3, {0, 1}},     // level 1, columns 0-2
                           {34, 2, {2}}, {35, 3, {0, 3}}, {36, 4, {0, 1, 4}}});  // level 2

  const int64_t step3[] = {40, 41, 42, 43, 44, 45, 46, 47};
  w.advance(77, step3, pool);  // full: argmaxes of level 2 (rows 5-7) complete one 4-gram per column
  EXPECT_EQ(all_continuations(pool, 77), (std::vector<std::vector<int64_t>>{{21, 34, 45}}));  // column 0: the root
  EXPECT_EQ(all_continuations(pool, 12), (std::vector<std::vector<int64_t>>{{22, 35, 46}}));
  EXPECT_EQ(all_continuations(pool, 13), (std::vector<std::vector<int64_t>>{{23, 36, 47}}));
  EXPECT_EQ(pool.keys(), 3u);
  // One position on: level 0 <- level 1 without column 0, level 1 <- level 2, level 2 <- the argmaxes.
  EXPECT_EQ(w.level(0), (std::vector<int64_t>{22, 23}));
  EXPECT_EQ(w.level(1), (std::vector<int64_t>{34, 35, 36}));
  EXPECT_EQ(w.level(2), (std::vector<int64_t>{45, 46, 47}));
}

TEST(LookaheadWindow, TheSmallestWindowIsOneColumn) {
  LookaheadWindow w(1, 3);
  w.reset({5});
  expect_rows(rows_of(w), {{5, 1, {}}});
  NGramPool pool(3, 1);
  const int64_t a[] = {6};
  w.advance(4, a, pool);
  EXPECT_TRUE(w.full());
  expect_rows(rows_of(w), {{6, 1, {}}});  // level 0 empty: the root is the only column
  const int64_t b[] = {7};
  w.advance(4, b, pool);
  EXPECT_EQ(all_continuations(pool, 4), (std::vector<std::vector<int64_t>>{{6, 7}}));
  expect_rows(rows_of(w), {{7, 1, {}}});
}

TEST(GuessTrie, NewestFirstSharedPrefixesMergedAndCut) {
  NGramPool pool(4, 8);
  const int64_t g1[] = {1, 2, 3}, g2[] = {1, 2, 4}, g3[] = {1, 6, 7}, other[] = {9, 9, 9};
  for (const int64_t* g : {g1, g2, g3}) pool.add(5, g);
  pool.add(8, other);
  DraftTree t;
  add_guess_trie(t, pool, 5, 3, 100);
  // Newest first: 1-6-7, then 1-2-4 (sharing 1), then 1-2-3 (sharing 1-2).
  ASSERT_EQ(t.size(), 6);
  const std::vector<std::pair<int64_t, int32_t>> want{{1, -1}, {6, 0}, {7, 1}, {2, 0}, {4, 3}, {3, 3}};
  for (int32_t i = 0; i < 6; ++i) {
    EXPECT_EQ(t.node(i).token, want[i].first) << i;
    EXPECT_EQ(t.node(i).parent, want[i].second) << i;
    EXPECT_EQ(t.node(i).distribution, -1) << "point masses";
  }
  DraftTree shallow;
  add_guess_trie(shallow, pool, 5, 2, 100);  // cut to depth 2: 1-6, 1-2
  EXPECT_EQ(shallow.size(), 3);
  EXPECT_EQ(shallow.max_depth(), 2);
  DraftTree small;
  add_guess_trie(small, pool, 5, 3, 4);  // at most 4 nodes: 1-6-7, then 2
  ASSERT_EQ(small.size(), 4);
  EXPECT_EQ(small.node(3).token, 2);
  DraftTree none;
  add_guess_trie(none, pool, 42, 3, 100);
  EXPECT_TRUE(none.empty());
}

// The strategy through its public interface: window rows each cycle, the harvested n-grams proposed as guesses
// when their first token is the root. W = 2, N = 3, G = 2.
TEST(LookaheadStrategy, ProposesTheWindowAndThePoolsNGramsForTheRoot) {
  auto model = tiny_model();
  auto s = make_strategy("lookahead", StrategyContext{*model},
                         StrategyOptions::parse({"window=2", "ngram=3", "guesses=2"}));
  const std::vector<int64_t> prompt{3, 4, 5};
  s->begin(prompt, at::Tensor(), 50);
  Sampler sampler(SamplingParams{});
  std::vector<int64_t> seq{3, 4, 5, 50};
  auto propose = [&](int32_t max_nodes = 100, int32_t wanted = 100) {
    return propose_one(*s, DraftRequest{seq, max_nodes, wanted, sampler});
  };
  auto observe = [&](const std::vector<int64_t>& argmax) {
    VerifyResult r;
    r.extra_logits = at::zeros({static_cast<int64_t>(argmax.size()), 97});
    for (size_t i = 0; i < argmax.size(); ++i) r.extra_logits[static_cast<int64_t>(i)][argmax[i]] = 1.0f;
    observe_one(*s, r);
  };

  // Cycle 1: warm-up window, W + N - 3 = 2 prompt tokens at depths 1, 2; no guesses yet.
  DraftTree t1 = propose();
  EXPECT_EQ(t1.size(), 0);
  ASSERT_EQ(t1.extra_size(), 2);
  for (const ExtraRow& e : t1.extra_rows()) EXPECT_TRUE(e.token >= 3 && e.token <= 5) << "drawn from the prompt";
  const int64_t x = t1.extra_rows()[1].token;  // level 0 keeps its second cell
  observe({60, 61});

  // Cycle 2: full window: level 0 = [x] (column 1), level 1 = [60, 61] (columns 0, 1).
  seq.push_back(51);
  DraftTree t2 = propose();
  EXPECT_EQ(t2.size(), 0);
  ASSERT_EQ(t2.extra_size(), 3);
  EXPECT_EQ(t2.extra_rows()[0].token, x);
  EXPECT_EQ(t2.extra_rows()[1].token, 60);
  EXPECT_EQ(t2.extra_rows()[2].token, 61);
  EXPECT_EQ(t2.extra_rows()[2].sees_rows, (std::vector<int32_t>{0}));
  observe({70, 71, 72});  // level 1's argmaxes (rows 1, 2): 71, 72. N-grams: 51 60 71, x 61 72.

  // Cycle 3 with root 51: its n-gram is the guess (a chain 60, 71); the window moved: level 0 = [61], level 1 = [71, 72].
  seq.push_back(51);
  DraftTree t3 = propose();
  ASSERT_EQ(t3.size(), 2);
  EXPECT_EQ(t3.node(0).token, 60);
  EXPECT_EQ(t3.node(1).token, 71);
  EXPECT_EQ(t3.node(1).parent, 0);
  ASSERT_EQ(t3.extra_size(), 3);
  EXPECT_EQ(t3.extra_rows()[0].token, 61);
  EXPECT_EQ(t3.extra_rows()[1].token, 71);
  observe({80, 81, 82});  // n-grams: 51 71 81 (51 now holds two), 61 72 82

  // Root x: the other n-gram of cycle 2; only one token wanted: the guess is cut to depth 1 and no window runs.
  seq.push_back(x);
  DraftTree t4 = propose(100, 1);
  ASSERT_EQ(t4.size(), 1);
  EXPECT_EQ(t4.node(0).token, 61);
  EXPECT_EQ(t4.extra_size(), 0);
  observe_one(*s, VerifyResult{});  // nothing to read: the window stays

  // Root 51 again, room for 2 rows: no window (3 rows); its newest n-gram only.
  seq.push_back(51);
  DraftTree t5 = propose(2);
  EXPECT_EQ(t5.extra_size(), 0);
  ASSERT_EQ(t5.size(), 2);
  EXPECT_EQ(t5.node(0).token, 71);
  EXPECT_EQ(t5.node(1).token, 81);
  observe_one(*s, VerifyResult{});

  // With room: the window, and both of 51's n-grams, newest first.
  DraftTree t6 = propose();
  ASSERT_EQ(t6.extra_size(), 3);
  EXPECT_EQ(t6.extra_rows()[0].token, 72) << "the window moved once more after cycle 3, and not since";
  ASSERT_EQ(t6.size(), 4);
  const std::vector<std::pair<int64_t, int32_t>> want{{71, -1}, {81, 0}, {60, -1}, {71, 2}};
  for (int32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(t6.node(i).token, want[i].first) << i;
    EXPECT_EQ(t6.node(i).parent, want[i].second) << i;
  }
}

TEST(LookaheadStrategy, PromptPoolProposesTheSequencesNGrams) {
  auto model = tiny_model();
  auto s = make_strategy("lookahead", StrategyContext{*model},
                         StrategyOptions::parse({"window=2", "ngram=3", "guesses=4", "prompt_pool=true"}));
  const std::vector<int64_t> prompt{1, 2, 3, 1, 2};
  s->begin(prompt, at::Tensor(), 1);
  Sampler sampler(SamplingParams{});
  std::vector<int64_t> seq{1, 2, 3, 1, 2, 1};
  // 3-grams of the sequence under key 1: (2 3), (2 1); newest first as a trie: 2 -> {1, 3}.
  DraftTree t = propose_one(*s, DraftRequest{seq, 100, 100, sampler});
  ASSERT_EQ(t.size(), 3);
  EXPECT_EQ(t.node(0).token, 2);
  EXPECT_EQ(t.node(1).token, 1);
  EXPECT_EQ(t.node(2).token, 3);
  EXPECT_EQ(t.node(2).parent, 0);
}

// The window's pattern means what the paper says: run its rows as extra rows of one verification and compare each
// cell's logits with a forward of root, level 0 up to the cell's column, then the column's cells down to it.
TEST(LookaheadWindow, EachCellScoresItsOwnJacobiSequence) {
  auto model = tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Native);
  const std::vector<int64_t> prefix{3, 14, 15, 92, 65};
  LookaheadWindow w(3, 4);
  w.reset({40, 41, 42, 43});
  NGramPool pool(4, 4);
  const int64_t a1[] = {50, 51, 52, 53}, a2[] = {60, 61, 62, 63, 64, 65, 66};
  w.advance(prefix.back(), a1, pool);
  w.advance(prefix.back(), a2, pool);
  ASSERT_TRUE(w.full());
  DraftTree t;
  w.add_rows(t);
  KvCache cache = model->make_cache(64);
  model->forward_chain(cache, std::vector<int64_t>(prefix.begin(), prefix.end() - 1));
  Sampler sampler(SamplingParams{});
  Verifier verifier(*model, sampler);
  const VerifyResult r = verifier.verify(cache, prefix.back(), t);
  int row = 0;
  const auto L0 = static_cast<int32_t>(w.level(0).size());
  for (int32_t l = 0; l < w.filled_levels(); ++l)
    for (int32_t c = l == 0 ? 1 : 0; c <= L0; ++c, ++row) {
      std::vector<int64_t> seq(prefix.begin(), prefix.end());  // the root, then level 0 up to column c
      for (int32_t k = 1; k <= c; ++k) seq.push_back(w.level(0)[k - 1]);
      for (int32_t k = 1; k <= l; ++k) seq.push_back(w.level(k)[c]);  // column c's cells of levels 1..l
      KvCache fresh = model->make_cache(64);
      auto out = model->forward_chain(fresh, seq);
      EXPECT_TRUE(at::equal(r.extra_logits[row], out.logits[out.logits.size(0) - 1])) << "cell " << l << "," << c;
    }
  EXPECT_EQ(row, w.rows());
}

// setting=official: the first Jacobi step runs on level 0 in the prefill, so the first cycle proposes what a cold
// start proposes in its second cycle after the same argmaxes.
TEST(LookaheadStrategy, OfficialSettingTakesTheFirstJacobiStepInThePrefill) {
  auto model = tiny_model();
  const std::vector<std::string> shape{"window=2", "ngram=4", "guesses=2"};
  std::vector<std::string> official = shape, cold = shape;
  official.push_back("setting=official");
  cold.push_back("setting=cpu");
  auto a = make_strategy("lookahead", StrategyContext{*model}, StrategyOptions::parse(official));
  auto b = make_strategy("lookahead", StrategyContext{*model}, StrategyOptions::parse(cold));
  const std::vector<int64_t> prompt{3, 4, 5, 6};
  EXPECT_TRUE(b->prefill_rows(prompt, 100).empty()) << "the CPU setting has no prefill step";
  const std::vector<int64_t> rows = a->prefill_rows(prompt, 100);
  ASSERT_EQ(rows.size(), 3u) << "level 0: W + N - 3 tokens";
  EXPECT_TRUE(a->prefill_rows(prompt, 2).empty()) << "no room: a cold start";
  ASSERT_EQ(a->prefill_rows(prompt, 100), rows) << "the same draw every time";
  Sampler sampler(SamplingParams{});
  std::vector<int64_t> seq{3, 4, 5, 6, 50};
  auto one_hot_rows = [](const std::vector<int64_t>& argmax) {
    at::Tensor l = at::zeros({static_cast<int64_t>(argmax.size()), 97});
    for (size_t i = 0; i < argmax.size(); ++i) l[static_cast<int64_t>(i)][argmax[i]] = 1.0f;
    return l;
  };
  a->begin(prompt, at::Tensor(), 50);
  a->observe_prefill_rows(one_hot_rows({60, 61, 62}));
  b->begin(prompt, at::Tensor(), 50);
  const DraftTree cold1 = propose_one(*b, DraftRequest{seq, 100, 100, sampler});
  ASSERT_EQ(cold1.extra_size(), 3);
  for (int32_t i = 0; i < 3; ++i) EXPECT_EQ(cold1.extra_rows()[i].token, rows[i]) << "the same level 0";
  VerifyResult r;
  r.extra_logits = one_hot_rows({60, 61, 62});
  observe_one(*b, r);
  const DraftTree hot1 = propose_one(*a, DraftRequest{seq, 100, 100, sampler});
  const DraftTree cold2 = propose_one(*b, DraftRequest{seq, 100, 100, sampler});
  ASSERT_EQ(hot1.extra_size(), cold2.extra_size());
  EXPECT_EQ(hot1.extra_size(), 2 + 3);  // level 0 [x, y], level 1 [60, 61, 62]
  for (int32_t i = 0; i < hot1.extra_size(); ++i) {
    EXPECT_EQ(hot1.extra_rows()[i].token, cold2.extra_rows()[i].token) << i;
    EXPECT_EQ(hot1.extra_rows()[i].sees_rows, cold2.extra_rows()[i].sees_rows) << i;
  }
  expect_error([&] { a->observe_prefill_rows(one_hot_rows({1, 2})); }, {"prefill rows"});
}

// ngram_bonus=false (the official rule): a guess stops before its last token, so a full match yields N - 1 tokens
// with the verifier's own.
TEST(LookaheadStrategy, WithoutTheBonusAGuessIsCutBeforeItsLastToken) {
  auto model = tiny_model();
  const std::vector<int64_t> prompt{1, 2, 3, 4, 1};
  Sampler sampler(SamplingParams{});
  const std::vector<int64_t> seq{1, 2, 3, 4, 1, 1};
  for (bool bonus : {true, false}) {
    auto s = make_strategy("lookahead", StrategyContext{*model},
                           StrategyOptions::parse({"window=2", "ngram=4", "guesses=2", "prompt_pool=true",
                                                   std::string("ngram_bonus=") + (bonus ? "true" : "false")}));
    s->begin(prompt, at::Tensor(), 1);
    const DraftTree t = propose_one(*s, DraftRequest{seq, 100, 100, sampler});  // key 1: 2 3 4
    ASSERT_EQ(t.size(), bonus ? 3 : 2);
    EXPECT_EQ(t.node(0).token, 2);
    EXPECT_EQ(t.node(1).token, 3);
  }
}

// Whatever a strategy runs in the prefill, each of its rows is scored as a causal continuation of the prompt, the
// prompt's own rows are untouched (same first token and features as without), and the cache keeps the prompt only.
class PrefillRowsSpy : public NoDraftStrategy {
 public:
  std::vector<int64_t> prefill_rows(const std::vector<int64_t>&, int64_t max_rows) override {
    EXPECT_GE(max_rows, 3);
    return {7, 8, 9};
  }
  void begin(const std::vector<int64_t>&, const at::Tensor& features, int64_t) override { feature_rows = features.size(0); }
  void observe_prefill_rows(const at::Tensor& logits) override { seen = logits.clone(); }
  at::Tensor seen;
  int64_t feature_rows = 0;
};

TEST(PrefillRows, AreScoredAfterThePromptAndDroppedFromTheCache) {
  auto model = tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Native);
  const std::vector<int64_t> prompt{3, 14, 15, 92, 65};
  std::vector<int64_t> chain = prompt;
  chain.insert(chain.end(), {7, 8, 9});
  KvCache fresh = model->make_cache(16);
  const at::Tensor want = model->forward_chain(fresh, chain).logits.narrow(0, 5, 3);
  GenerationConfig gen;
  gen.max_new_tokens = 12;
  const auto vanilla = generate_vanilla(*model, prompt, gen);

  PrefillRowsSpy alone;
  const auto got = SpeculativeDecoder(*model, alone).generate(prompt, gen);
  EXPECT_EQ(got.tokens, vanilla.tokens);
  EXPECT_EQ(alone.feature_rows, 5);
  ASSERT_TRUE(alone.seen.defined());
  EXPECT_TRUE(at::equal(alone.seen, want));

  PrefillRowsSpy first, second;
  const std::vector<int64_t> other{3, 14, 15};
  const auto batch = SpeculativeDecoder(*model, {&first, &second}).generate({{prompt, 0}, {other, 0}}, gen);
  EXPECT_EQ(batch.sequences[0].tokens, vanilla.tokens);
  EXPECT_EQ(batch.sequences[1].tokens, generate_vanilla(*model, other, gen).tokens);
  EXPECT_EQ(first.feature_rows, 5);
  EXPECT_EQ(second.feature_rows, 3);
  ASSERT_TRUE(first.seen.defined());
  EXPECT_TRUE(at::equal(first.seen, want));
}

}  // namespace
