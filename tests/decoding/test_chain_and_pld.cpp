// The "chain" (draft-model speculative sampling) and "pld" (prompt lookup) strategies on their own: what they
// propose, how the chain's draft cache follows acceptances and rollbacks, and their option errors.
// (That decoding with them is lossless is tested for every strategy in test_lossless_*.)
#include <gtest/gtest.h>

#include <random>

#include "test_errors.h"
#include "core/base/error.h"
#include "core/decoding/speculative_decoder.h"
#include "core/decoding/vanilla_decoder.h"
#include "model/model_fixtures.h"
#include "strategies/registry.h"
#include "test_paths.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

const char* kAidreams = "models/aidreams260K/aidreams260K.bin";  // context 128, vocab 512
const char* kStories = "models/stories260K/stories260K.bin";     // context 512, vocab 512

std::vector<int64_t> tokens_of(const DraftTree& tree) {
  std::vector<int64_t> out;
  for (const auto& n : tree.nodes()) out.push_back(n.token);
  return out;
}

// The tree is a chain: node i is the only child of node i - 1.
void expect_chain(const DraftTree& tree) {
  for (int32_t i = 0; i < tree.size(); ++i) {
    EXPECT_EQ(tree.node(i).parent, i - 1);
    EXPECT_EQ(tree.node(i).depth, i + 1);
  }
}

DraftTree propose(DraftStrategy& s, const std::vector<int64_t>& seq, Sampler& sampler, int32_t max_nodes = 1000,
                  int32_t tokens_wanted = 1000) {
  return propose_one(s, DraftRequest{seq, max_nodes, tokens_wanted, sampler});
}

// ---------------------------------------------------------------------------------------------------------------
// pld

class PromptLookup : public ::testing::Test {
 protected:
  std::unique_ptr<DraftStrategy> make(std::vector<std::string> options = {}) {
    return make_strategy("pld", StrategyContext{*target}, StrategyOptions::parse(options));
  }
  std::vector<int64_t> lookup(const std::vector<int64_t>& seq, std::vector<std::string> options = {},
                              int32_t max_nodes = 1000, int32_t tokens_wanted = 1000) {
    auto s = make(options);
    s->begin(seq, {}, seq.back());
    DraftTree tree = propose(*s, seq, sampler, max_nodes, tokens_wanted);
    expect_chain(tree);
    for (const auto& n : tree.nodes()) {
      EXPECT_EQ(n.distribution, -1);
      EXPECT_EQ(n.confidence, 1.0f);
    }
    return tokens_of(tree);
  }
  std::unique_ptr<LlamaModel> target = tiny_model();  // pld ignores it; the registry wants a context
  Sampler sampler{SamplingParams{}};
};

TEST_F(PromptLookup, ProposesWhatFollowedTheRepeatedNgram) {
  // "5 6 7" occurred at the start, followed by 8 9 1 2.
  EXPECT_EQ(lookup({5, 6, 7, 8, 9, 1, 2, 5, 6, 7}, {"num_tokens=4"}), (std::vector<int64_t>{8, 9, 1, 2}));
}

TEST_F(PromptLookup, NothingWithoutAMatch) {
  EXPECT_TRUE(lookup({1, 2, 3, 4, 5}).empty());
  EXPECT_TRUE(lookup({7}).empty());
  // A suffix that occurred only as the suffix itself is no match; min_ngram=2 rules out the single "3".
  EXPECT_TRUE(lookup({3, 1, 2, 3}, {"min_ngram=2"}).empty());
}

TEST_F(PromptLookup, LongestNgramIsPreferred) {
  // 3-gram "1 2 3" occurred at the start (then 50); the 1-gram "3" occurred more recently (then 60).
  const std::vector<int64_t> seq{1, 2, 3, 50, 9, 3, 60, 1, 2, 3};
  EXPECT_EQ(lookup(seq, {"num_tokens=1"}), (std::vector<int64_t>{50}));
  EXPECT_EQ(lookup(seq, {"num_tokens=1", "max_ngram=1"}), (std::vector<int64_t>{60}));
}

TEST_F(PromptLookup, MostRecentOccurrenceIsPreferred) {
  EXPECT_EQ(lookup({4, 10, 4, 11, 4, 12, 7, 4}, {"num_tokens=2"}), (std::vector<int64_t>{12, 7}));
}

TEST_F(PromptLookup, AContinuationReachingTheEndRepeatsThePeriod) {
  // "1 2" occurred at 0; what followed it is "3 1 2" and then, by the same period, "3 1 ...".
  EXPECT_EQ(lookup({1, 2, 3, 1, 2}, {"num_tokens=5"}), (std::vector<int64_t>{3, 1, 2, 3, 1}));
  EXPECT_EQ(lookup({9, 9, 9}, {"num_tokens=3"}), (std::vector<int64_t>{9, 9, 9}));
}

TEST_F(PromptLookup, RespectsTheBudget) {
  const std::vector<int64_t> seq{5, 6, 7, 8, 9, 1, 2, 5, 6, 7};
  EXPECT_EQ(lookup(seq, {}).size(), 10u);  // default num_tokens
  EXPECT_EQ(lookup(seq, {}, /*max_nodes=*/3).size(), 3u);
  EXPECT_EQ(lookup(seq, {}, 1000, /*tokens_wanted=*/2).size(), 2u);
  EXPECT_TRUE(lookup(seq, {}, 0).empty());
}

// The brute-force definition: longest suffix n-gram first, then its most recent earlier occurrence; copy from
// the sequence extended by the draft itself.
std::vector<int64_t> reference_lookup(const std::vector<int64_t>& seq, int64_t min_n, int64_t max_n, int64_t k) {
  const auto L = static_cast<int64_t>(seq.size());
  for (int64_t n = std::min(max_n, L - 1); n >= min_n; --n) {
    for (int64_t s = L - n - 1; s >= 0; --s) {
      if (!std::equal(seq.begin() + s, seq.begin() + s + n, seq.end() - n)) continue;
      std::vector<int64_t> ext = seq, out;
      for (int64_t i = 0; i < k; ++i) {
        out.push_back(ext[s + n + i]);
        ext.push_back(out.back());
      }
      return out;
    }
  }
  return {};
}

TEST_F(PromptLookup, IncrementalIndexMatchesBruteForceAcrossAGeneration) {
  std::mt19937 rng(3);
  for (int round = 0; round < 20; ++round) {
    auto s = make({"max_ngram=4", "min_ngram=2", "num_tokens=6"});
    std::vector<int64_t> seq;
    for (int i = 0; i < 5; ++i) seq.push_back(rng() % 4);  // small alphabet: many matches
    s->begin(std::vector<int64_t>(seq.begin(), seq.end() - 1), {}, seq.back());
    while (seq.size() < 120) {
      DraftTree tree = propose(*s, seq, sampler);
      ASSERT_EQ(tokens_of(tree), reference_lookup(seq, 2, 4, 6)) << "round " << round << " length " << seq.size();
      // Accept a random prefix of the draft, then a random next token, as a verification would.
      VerifyResult result;
      const int accepted = tree.empty() ? 0 : static_cast<int>(rng() % (tree.size() + 1));
      for (int i = 0; i < accepted; ++i) {
        result.accepted_nodes.push_back(i);
        result.tokens.push_back(tree.node(i).token);
      }
      result.tokens.push_back(rng() % 4);
      observe_one(*s, result);
      seq.insert(seq.end(), result.tokens.begin(), result.tokens.end());
    }
  }
}

TEST_F(PromptLookup, BeginStartsANewSequence) {
  auto s = make({"num_tokens=2"});
  std::vector<int64_t> first{1, 2, 3, 4, 5, 6, 7, 1, 2};
  s->begin(first, {}, 2);
  EXPECT_EQ(tokens_of(propose(*s, first, sampler)), (std::vector<int64_t>{3, 4}));
  std::vector<int64_t> second{1, 2, 8, 8, 8, 8, 8, 8, 8, 8, 8, 1, 2};  // longer, and "1 2" is followed by 8 now
  s->begin(second, {}, 2);
  EXPECT_EQ(tokens_of(propose(*s, second, sampler)), (std::vector<int64_t>{8, 8}));
}

TEST_F(PromptLookup, OptionErrorsNameTheOption) {
  expect_error([&] { make({"min_ngram=0"}); }, {"min_ngram", "0"});
  expect_error([&] { make({"max_ngram=2", "min_ngram=3"}); }, {"max_ngram", "min_ngram"});
  expect_error([&] { make({"num_tokens=0"}); }, {"num_tokens"});
  expect_error([&] { make({"ngram=2"}); }, {"ngram", "max_ngram=3"});  // unknown key: lists the options
}

// ---------------------------------------------------------------------------------------------------------------
// chain

std::unique_ptr<DraftStrategy> make_chain(const LlamaModel& target, const std::string& draft_rel, int64_t gamma) {
  return make_strategy("chain", StrategyContext{target},
                       StrategyOptions::parse({"draft=" + shared_path(draft_rel), "gamma=" + std::to_string(gamma)}));
}

std::vector<int64_t> greedy_continuation(const LlamaModel& model, const std::vector<int64_t>& prompt, int64_t n) {
  GenerationConfig gen;
  gen.max_new_tokens = n;
  return generate_vanilla(model, prompt, gen).tokens;
}

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<int64_t> kPrompt{1, 403, 261, 303, 280, 344, 42, 17};

TEST(ChainDraft, SelfDraftProposesTheTargetsGreedyContinuation) {
  DRAFTLAB_REQUIRE_SHARED(kAidreams);
  auto target = LlamaModel::load(shared_path(kAidreams), ComputeOptions{});
  auto strategy = make_chain(*target, kAidreams, 5);  // the same checkpoint, loaded a second time
  EXPECT_EQ(strategy->name(), "chain");
  const auto want = greedy_continuation(*target, kPrompt, 6);  // root, then 5 draft tokens
  strategy->begin(kPrompt, {}, want[0]);
  Sampler sampler{SamplingParams{}};
  DraftTree tree = propose(*strategy, concat(kPrompt, {want[0]}), sampler);
  expect_chain(tree);
  EXPECT_EQ(tokens_of(tree), std::vector<int64_t>(want.begin() + 1, want.end()));
  for (const auto& n : tree.nodes()) {
    EXPECT_EQ(n.distribution, -1) << "T = 0 drafts are deterministic";
    EXPECT_GT(n.confidence, 0.0f);
    EXPECT_LE(n.confidence, 1.0f);
  }
}

// After a verification that accepts `accepted` of the drafts and then a token the draft did not predict, the
// next proposal must equal a fresh strategy's for the same sequence: the rejected rows are gone from the cache.
class ChainRollback : public ::testing::TestWithParam<int> {};

TEST_P(ChainRollback, NextProposalEqualsAFreshStrategys) {
  DRAFTLAB_REQUIRE_SHARED(kAidreams);
  DRAFTLAB_REQUIRE_SHARED(kStories);
  const int accepted = GetParam();
  auto target = LlamaModel::load(shared_path(kAidreams), ComputeOptions{});
  auto used = make_chain(*target, kStories, 4);
  Sampler sampler{SamplingParams{}};
  const int64_t root = 300;
  used->begin(kPrompt, {}, root);
  std::vector<int64_t> seq = concat(kPrompt, {root});
  DraftTree first = propose(*used, seq, sampler);
  ASSERT_EQ(first.size(), 4);

  VerifyResult result;
  for (int i = 0; i < accepted; ++i) {
    result.accepted_nodes.push_back(i);
    result.tokens.push_back(first.node(i).token);
  }
  const int64_t predicted = accepted < 4 ? first.node(accepted).token : -1;
  result.tokens.push_back(predicted == 77 ? 78 : 77);  // the next root: not what the draft predicted
  observe_one(*used, result);
  seq = concat(seq, result.tokens);

  auto fresh = make_chain(*target, kStories, 4);
  fresh->begin(kPrompt, {}, root);
  const DraftTree want = propose(*fresh, seq, sampler);
  const DraftTree got = propose(*used, seq, sampler);
  ASSERT_EQ(tokens_of(got), tokens_of(want));
  for (int32_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got.node(i).confidence, want.node(i).confidence, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Accepted, ChainRollback, ::testing::Values(0, 1, 3, 4));

TEST(ChainDraft, WithoutObserveOrAfterBeginItStillMatchesAFreshStrategy) {
  DRAFTLAB_REQUIRE_SHARED(kAidreams);
  DRAFTLAB_REQUIRE_SHARED(kStories);
  auto target = LlamaModel::load(shared_path(kAidreams), ComputeOptions{});
  auto used = make_chain(*target, kStories, 3);
  Sampler sampler{SamplingParams{}};
  used->begin(kPrompt, {}, 300);
  propose(*used, concat(kPrompt, {300}), sampler);
  // A new sequence sharing a prefix with the old one.
  const std::vector<int64_t> other{1, 403, 261, 99, 98};
  used->begin(other, {}, 5);
  auto fresh = make_chain(*target, kStories, 3);
  fresh->begin(other, {}, 5);
  EXPECT_EQ(tokens_of(propose(*used, concat(other, {5}), sampler)),
            tokens_of(propose(*fresh, concat(other, {5}), sampler)));
  // Proposing twice for the same sequence (no observe in between) gives the same draft.
  EXPECT_EQ(tokens_of(propose(*used, concat(other, {5}), sampler)),
            tokens_of(propose(*fresh, concat(other, {5}), sampler)));
}

TEST(ChainDraft, SamplingRecordsTheDraftDistribution) {
  DRAFTLAB_REQUIRE_SHARED(kAidreams);
  DRAFTLAB_REQUIRE_SHARED(kStories);
  auto target = LlamaModel::load(shared_path(kAidreams), ComputeOptions{});
  auto strategy = make_chain(*target, kStories, 4);
  SamplingParams params;
  params.temperature = 0.8;
  params.top_k = 40;
  Sampler sampler{params, 5};
  strategy->begin(kPrompt, {}, 300);
  DraftTree tree = propose(*strategy, concat(kPrompt, {300}), sampler);
  ASSERT_EQ(tree.size(), 4);
  expect_chain(tree);
  for (int32_t i = 0; i < tree.size(); ++i) {
    const DraftNode& n = tree.node(i);
    ASSERT_GE(n.distribution, 0) << "T > 0 drafts are sampled: q must be recorded";
    const at::Tensor q = tree.distribution(n.distribution);
    EXPECT_EQ(q.numel(), 512);
    EXPECT_NEAR(q.sum().item<double>(), 1.0, 1e-5);
    EXPECT_LE((q > 0).sum().item<int64_t>(), 40) << "top-k applies to the draft too";
    EXPECT_FLOAT_EQ(n.confidence, q[n.token].item<float>());
    EXPECT_GT(n.confidence, 0.0f);
  }
}

TEST(ChainDraft, RespectsTheBudgetAndTheDraftsContext) {
  DRAFTLAB_REQUIRE_SHARED(kAidreams);
  auto target = LlamaModel::load(shared_path(kAidreams), ComputeOptions{});
  auto strategy = make_chain(*target, kAidreams, 4);
  Sampler sampler{SamplingParams{}};
  strategy->begin(kPrompt, {}, 300);
  const auto seq = concat(kPrompt, {300});
  EXPECT_EQ(propose(*strategy, seq, sampler, /*max_nodes=*/2).size(), 2);
  EXPECT_EQ(propose(*strategy, seq, sampler, 1000, /*tokens_wanted=*/3).size(), 3);
  EXPECT_TRUE(propose(*strategy, seq, sampler, 0).empty());

  // aidreams260K has a context of 128 positions. Drafting k tokens feeds n + k - 1 of them.
  for (int64_t n : {126, 127, 128, 129, 140}) {
    std::vector<int64_t> long_seq;
    for (int64_t i = 0; i < n; ++i) long_seq.push_back(1 + (i * 37) % 500);
    strategy->begin(std::vector<int64_t>(long_seq.begin(), long_seq.end() - 1), {}, long_seq.back());
    EXPECT_EQ(propose(*strategy, long_seq, sampler).size(), std::max<int64_t>(0, std::min<int64_t>(4, 129 - n)))
        << "sequence of " << n;
  }
}

TEST(ChainDraft, DraftCacheGrowsPastItsInitialSize) {
  // stories260K (context 512) drafting for itself from a 254-token prompt: the draft cache starts at 256 rows
  // and must grow, keeping its rows, in the middle of a proposal.
  DRAFTLAB_REQUIRE_SHARED(kStories);
  auto target = LlamaModel::load(shared_path(kStories), ComputeOptions{});
  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < 254; ++i) prompt.push_back(1 + (i * 101) % 511);
  const auto want = greedy_continuation(*target, prompt, 7);
  auto strategy = make_chain(*target, kStories, 6);
  strategy->begin(prompt, {}, want[0]);
  Sampler sampler{SamplingParams{}};
  EXPECT_EQ(tokens_of(propose(*strategy, concat(prompt, {want[0]}), sampler)),
            std::vector<int64_t>(want.begin() + 1, want.end()));
}

TEST(ChainDraft, Errors) {
  auto tiny = tiny_model();  // vocab 97
  expect_error([&] { make_strategy("chain", StrategyContext{*tiny}, StrategyOptions::parse({})); },
                        {"chain", "draft"});
  expect_error(
      [&] { make_strategy("chain", StrategyContext{*tiny}, StrategyOptions::parse({"draft=/nonexistent/model"})); },
      {"/nonexistent/model"});
  DRAFTLAB_REQUIRE_SHARED(kAidreams);
  expect_error([&] { make_chain(*tiny, kAidreams, 4); }, {"vocab_size", "512", "97", kAidreams});
  auto target = LlamaModel::load(shared_path(kAidreams), ComputeOptions{});
  expect_error([&] { make_chain(*target, kAidreams, 0); }, {"gamma", "0"});
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// The verifier's commit limit (SpeculativeDecoder::set_commit_limit), as --oracle uses it: committing at most k
// accepted drafts per cycle keeps the greedy output; with k = 0 every answer position is a cycle start whose
// `matched` is what a draft from there gets accepted. For drafters whose draft depends on the committed text alone
// (prompt lookup, a draft model) the walk over those matches, each cycle committing all it matched, is the
// unlimited run's own sequence of cycles.

class CommitLimit : public ::testing::TestWithParam<std::string> {};

TEST_P(CommitLimit, KeepsTheOutputAndTheOracleWalkIsTheRunsOwnCycles) {
  // ts-target with ts-draft (the repository's story models, one tokenizer): drafts that are accepted often enough
  // to make cycles of several tokens, and rejected often enough that the walk has to follow them.
  const std::string target_dir = source_path("data/models/ts-target");
  auto target = LlamaModel::load(target_dir, ComputeOptions{});
  auto make = [&]() -> std::unique_ptr<DraftStrategy> {
    if (GetParam() == "pld") return make_strategy("pld", StrategyContext{*target}, StrategyOptions::parse({}));
    return make_strategy("chain", StrategyContext{*target},
                         StrategyOptions::parse({"draft=" + source_path("data/models/ts-draft"), "gamma=4"}));
  };
  // Prompts: BOS, the target's own story start, and that start twice (prompt lookup finds what follows).
  const std::vector<int64_t> story = concat({1}, greedy_continuation(*target, {1}, 24));
  GenerationConfig gen;
  gen.max_new_tokens = 48;
  int64_t matched_total = 0, multi_token_cycles = 0;
  for (const std::vector<int64_t>& prompt : {std::vector<int64_t>{1}, story, concat(story, story)}) {
    const auto vanilla = generate_vanilla(*target, prompt, gen).tokens;
    auto s = make();
    const SpeculativeResult run = SpeculativeDecoder(*target, *s).generate(prompt, gen);
    ASSERT_EQ(run.tokens, vanilla);
    for (int32_t limit : {0, 1}) {
      auto fresh = make();
      SpeculativeDecoder decoder(*target, *fresh);
      decoder.set_commit_limit(limit);
      const SpeculativeResult limited = decoder.generate(prompt, gen);
      ASSERT_EQ(limited.tokens, vanilla) << "commit limit " << limit;
      for (const CycleStats& c : limited.cycles) {
        EXPECT_LE(c.accepted, limit);
        EXPECT_EQ(c.accepted, std::min(c.matched, limit));
        EXPECT_LE(c.matched, c.drafted);
      }
      if (limit != 0) continue;
      // One cycle per answer token after the first (the prefill emits that one).
      ASSERT_EQ(limited.cycles.size() + 1, vanilla.size());
      std::vector<int32_t> walk;
      for (size_t t = 0; t < limited.cycles.size(); t += static_cast<size_t>(limited.cycles[t].matched) + 1)
        walk.push_back(limited.cycles[t].matched);
      std::vector<int32_t> own;
      for (const CycleStats& c : run.cycles) {
        own.push_back(c.accepted);
        multi_token_cycles += c.accepted > 0;
      }
      EXPECT_EQ(walk, own);
      for (const CycleStats& c : limited.cycles) matched_total += c.matched;
    }
  }
  // Not vacuous: drafts were accepted, some cycles committed several tokens.
  EXPECT_GT(matched_total, 10);
  EXPECT_GT(multi_token_cycles, 3);
}

INSTANTIATE_TEST_SUITE_P(Drafters, CommitLimit, ::testing::Values("pld", "chain"));
