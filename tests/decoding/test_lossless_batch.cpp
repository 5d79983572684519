// Batched decoding is lossless per sequence. B sequences decoded together (one target forward per cycle holding
// every sequence's tree: ragged rows, own masks, positions and caches) give each sequence exactly the tokens that
// SpeculativeDecoder gives it alone with the same seed, at T = 0 and T > 0, for every strategy configuration on
// both CPU paths; single decoding is itself held to vanilla by the other lossless tests, and batched vanilla is
// compared with the plain loop here. The batch is ragged (prompts of 6 to 48 tokens) and sequences leave it at
// different cycles (stop tokens, the end of the context). Below that, forward_batch itself: each sequence's rows
// bit for bit those of its own forward on the native path (dense and mixture of experts), and bad batches refused.
#include <gtest/gtest.h>

#include <set>

#include "core/decoding/speculative_decoder.h"
#include "strategies/eagle/eagle_head.h"
#include "core/decoding/vanilla_decoder.h"
#include "core/model/llama_model.h"
#include "lossless_fixtures.h"
#include "strategies/eagle_tree/eagle_drafter.h"
#include "model/model_fixtures.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

const char* kTarget = "models/aidreams260K/aidreams260K.bin";
const char* kTokenizer = "models/aidreams260K/tok512.bin";
const char* kOther = "models/stories260K/stories260K.bin";

// Five prompts of different lengths (6 .. 48 tokens) from the bench sets.
std::vector<std::vector<int64_t>> ragged_prompts(const Tokenizer& tok) {
  auto prompts = bench_prompts(tok, 9, 48);
  std::vector<std::vector<int64_t>> out;
  const size_t lengths[] = {48, 6, 30, 17, 41};
  for (size_t i = 0, p = 0; i < 5 && p < prompts.size(); ++p) {
    if (prompts[p].size() < lengths[i]) continue;
    prompts[p].resize(lengths[i]);
    out.push_back(prompts[p]);
    ++i;
  }
  return out;
}

class LosslessBatch : public ::testing::TestWithParam<LosslessCase> {
 protected:
  void SetUp() override {
    DRAFTLAB_REQUIRE_SHARED(kTarget);
    DRAFTLAB_REQUIRE_SHARED(kOther);
    DRAFTLAB_REQUIRE_SHARED("data/bench/mt_bench/question.jsonl");
    target = LlamaModel::load(shared_path(kTarget), GetParam().compute());
    tokenizer = load_tokenizer(shared_path(kTokenizer));
    for (const auto& c : all_strategy_configs(shared_path(kTarget), shared_path(kOther)))
      if (c.label == GetParam().config.label) config = c;
  }
  std::unique_ptr<DraftStrategy> make() const {
    return make_strategy(config.name, StrategyContext{*target}, StrategyOptions::parse(config.options));
  }
  std::unique_ptr<LlamaModel> target;
  std::unique_ptr<Tokenizer> tokenizer;
  StrategyConfig config;
};

TEST_P(LosslessBatch, EachSequenceAsDecodedAlone) {
  const auto prompts = ragged_prompts(*tokenizer);
  ASSERT_EQ(prompts.size(), 5u);
  for (double temperature : {0.0, 0.8}) {
    // A budget from measured costs (eagle2 total_tokens=auto) follows the batch's cost curve, so its trees (and with
    // them the random stream at T > 0) depend on the batch size; its T = 0 output may not.
    if (temperature > 0 && config.timing_dependent) continue;
    SCOPED_TRACE("T = " + std::to_string(temperature));
    GenerationConfig gen;
    gen.max_new_tokens = 40;
    gen.stop_tokens = {1};              // llama2.c models end a text with BOS
    gen.context_limit = 48 + 24;        // the 48-token prompt reaches the end of the context first
    gen.sampling.temperature = temperature;
    std::vector<BatchSequence> batch;
    std::vector<std::unique_ptr<DraftStrategy>> owned;
    std::vector<DraftStrategy*> strategies;
    for (size_t b = 0; b < prompts.size(); ++b) {
      batch.push_back({prompts[b], 100 + b});
      owned.push_back(make());
      strategies.push_back(owned.back().get());
    }
    SpeculativeDecoder decoder(*target, strategies);
    const BatchResult got = decoder.generate(batch, gen);
    ASSERT_EQ(got.sequences.size(), prompts.size());

    std::set<size_t> lengths;
    int64_t drafted = 0;
    for (size_t b = 0; b < prompts.size(); ++b) {
      GenerationConfig alone = gen;
      alone.seed = batch[b].seed;
      auto strategy = make();
      const SpeculativeResult want = SpeculativeDecoder(*target, *strategy).generate(prompts[b], alone);
      const SpeculativeResult& seq = got.sequences[b];
      EXPECT_EQ(seq.tokens, want.tokens) << "sequence " << b;
      EXPECT_EQ(seq.stop_reason, want.stop_reason) << "sequence " << b;
      if (!config.timing_dependent) EXPECT_EQ(seq.cycles.size(), want.cycles.size()) << "sequence " << b;
      lengths.insert(seq.cycles.size());
      for (const auto& c : seq.cycles) drafted += c.drafted;
    }
    // The batch shrank as sequences stopped: forwards with fewer sequences than it started with.
    EXPECT_GT(lengths.size(), 1u) << "every sequence ran the same number of cycles: none left the batch early";
    ASSERT_FALSE(got.batch_active.empty());
    EXPECT_EQ(got.batch_active.front(), 5);
    EXPECT_LT(got.batch_active.back(), 5);
    if (config.name != "vanilla" && config.may_draft_nothing.empty()) EXPECT_GT(drafted, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, LosslessBatch, ::testing::ValuesIn(on_both_paths(all_strategy_configs("", ""))),
                         case_name);

class BatchedVanilla : public ::testing::TestWithParam<CpuPath> {};

TEST_P(BatchedVanilla, EqualsThePlainLoop) {
  DRAFTLAB_REQUIRE_SHARED(kTarget);
  DRAFTLAB_REQUIRE_SHARED("data/bench/mt_bench/question.jsonl");
  ComputeOptions o;
  o.cpu_path = GetParam();
  auto target = LlamaModel::load(shared_path(kTarget), o);
  auto tokenizer = load_tokenizer(shared_path(kTokenizer));
  const auto prompts = ragged_prompts(*tokenizer);
  GenerationConfig gen;
  gen.max_new_tokens = 30;
  std::vector<BatchSequence> batch;
  std::vector<std::unique_ptr<DraftStrategy>> owned;
  std::vector<DraftStrategy*> strategies;
  for (const auto& p : prompts) {
    batch.push_back({p, 0});
    owned.push_back(make_strategy("vanilla", StrategyContext{*target}, StrategyOptions{}));
    strategies.push_back(owned.back().get());
  }
  const BatchResult got = SpeculativeDecoder(*target, strategies).generate(batch, gen);
  for (size_t b = 0; b < prompts.size(); ++b)
    EXPECT_EQ(got.sequences[b].tokens, generate_vanilla(*target, prompts[b], gen).tokens) << "sequence " << b;
  // Every forward after the prefill held one row per sequence still going.
  for (size_t f = 0; f < got.batch_rows.size(); ++f) EXPECT_EQ(got.batch_rows[f], got.batch_active[f]);
  EXPECT_GT(got.tokens_per_second(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Paths, BatchedVanilla, ::testing::Values(CpuPath::Native, CpuPath::Reference),
                         [](const auto& info) { return info.param == CpuPath::Native ? "native" : "reference"; });

// Three sequences in one forward - a prefill chain, a tree under a mask, a single row - against three forwards.
void expect_batch_equals_forwards(const LlamaModel& m) {
  const int64_t V = m.config().vocab_size;
  auto caches_of = [&] {
    std::vector<KvCache> caches;
    for (int64_t prefix : {0, 5, 9}) {
      caches.push_back(m.make_cache(32));
      if (prefix > 0) {
        std::vector<int64_t> t(prefix);
        for (int64_t i = 0; i < prefix; ++i) t[i] = (i * 13 + prefix) % V;
        m.forward_chain(caches.back(), t);
      }
    }
    return caches;
  };
  // A chain of 7 tokens (causal), a tree of 5 rows (root, two children, a grandchild under each), one row.
  const std::vector<std::vector<int64_t>> tokens{{3, 9, 4, 11, 2, 8, 5}, {7, 1, 6, 12, 10}, {4}};
  const std::vector<std::vector<int64_t>> positions{{0, 1, 2, 3, 4, 5, 6}, {5, 6, 6, 7, 7}, {9}};
  const std::vector<uint8_t> tree_mask{1, 0, 0, 0, 0,  //
                                       1, 1, 0, 0, 0,  //
                                       1, 0, 1, 0, 0,  //
                                       1, 1, 0, 1, 0,  //
                                       1, 0, 1, 0, 1};
  const uint8_t* masks[] = {nullptr, tree_mask.data(), nullptr};

  auto alone = caches_of();
  std::vector<ForwardOutput> want;
  for (size_t s = 0; s < 3; ++s)
    want.push_back(m.forward(alone[s], tokens[s].data(), positions[s].data(),
                             static_cast<int64_t>(tokens[s].size()), masks[s]));
  auto together = caches_of();
  std::vector<SequenceRows> rows;
  for (size_t s = 0; s < 3; ++s)
    rows.push_back({&together[s], tokens[s].data(), positions[s].data(), static_cast<int64_t>(tokens[s].size()),
                    masks[s]});
  const auto got = m.forward_batch(rows);
  ASSERT_EQ(got.size(), 3u);
  for (size_t s = 0; s < 3; ++s) {
    SCOPED_TRACE("sequence " + std::to_string(s));
    EXPECT_TRUE(at::equal(got[s].logits, want[s].logits)) << max_abs_diff(got[s].logits, want[s].logits);
    EXPECT_TRUE(at::equal(got[s].features, want[s].features));
    EXPECT_EQ(together[s].length(), alone[s].length());
    EXPECT_TRUE(at::equal(together[s].keys(0, together[s].length()), alone[s].keys(0, alone[s].length())));
    EXPECT_TRUE(at::equal(together[s].values(m.config().num_hidden_layers - 1, together[s].length()),
                          alone[s].values(m.config().num_hidden_layers - 1, alone[s].length())));
  }
  // The last rows only, as the batched prefill asks (against forwards that ask the same: on the reference path a
  // one-row LM head product rounds differently from an all-rows one).
  ForwardOptions last;
  last.logits = ForwardOptions::Logits::Last;
  auto last_caches = caches_of(), last_alone = caches_of();
  rows.clear();
  for (size_t s = 0; s < 3; ++s)
    rows.push_back({&last_caches[s], tokens[s].data(), positions[s].data(), static_cast<int64_t>(tokens[s].size()),
                    masks[s]});
  const auto lasts = m.forward_batch(rows, last);
  for (size_t s = 0; s < 3; ++s) {
    const auto one = m.forward(last_alone[s], tokens[s].data(), positions[s].data(),
                               static_cast<int64_t>(tokens[s].size()), masks[s], last);
    EXPECT_TRUE(at::equal(lasts[s].logits, one.logits)) << s;
  }
}

TEST(ForwardBatch, EachSequenceBitForBitAsItsOwnForwardNative) {
  expect_batch_equals_forwards(*tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Native));
}

TEST(ForwardBatch, EachSequenceBitForBitAsItsOwnForwardMixtureOfExperts) {
  auto m = tiny_moe_model(at::kFloat, 7, CpuPath::Native);
  ASSERT_NE(m->native(), nullptr);
  expect_batch_equals_forwards(*m);
}

TEST(ForwardBatch, ReferencePathRunsTheSequencesOneByOne) {
  expect_batch_equals_forwards(*tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Reference));
}

TEST(ForwardBatch, RefusesASharedCacheAndBadRowsWritingNothing) {
  auto m = tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Native);
  KvCache a = m->make_cache(8), b = m->make_cache(8);
  const std::vector<int64_t> t{1, 2}, p{0, 1}, bad{1, 500};
  try {
    m->forward_batch({{&a, t.data(), p.data(), 2, nullptr}, {&a, t.data(), p.data(), 2, nullptr}});
    FAIL() << "a shared cache was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("share a cache"), std::string::npos) << e.what();
  }
  EXPECT_THROW(m->forward_batch({{&a, t.data(), p.data(), 2, nullptr}, {&b, bad.data(), p.data(), 2, nullptr}}),
               Error);
  EXPECT_EQ(a.length(), 0);  // checked before anything ran
  EXPECT_EQ(b.length(), 0);
  EXPECT_THROW(m->forward_batch({}), Error);
}

TEST(BatchDecoder, ErrorsNameTheSequence) {
  auto m = tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Native);
  auto s0 = make_strategy("vanilla", StrategyContext{*m}, StrategyOptions{});
  auto s1 = make_strategy("vanilla", StrategyContext{*m}, StrategyOptions{});
  SpeculativeDecoder decoder(*m, {s0.get(), s1.get()});
  GenerationConfig gen;
  try {
    decoder.generate({{{1, 2, 3}, 0}, {{}, 0}}, gen);
    FAIL() << "an empty prompt was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch sequence 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(decoder.generate({{{1, 2, 3}, 0}}, gen), Error);  // one sequence for two strategies
  // One sequence alone: the error is the single-sequence one, without a batch index.
  SpeculativeDecoder alone(*m, *s0);
  try {
    alone.generate(std::vector<int64_t>{}, gen);
    FAIL() << "an empty prompt was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("batch sequence"), std::string::npos) << e.what();
  }
}

// A batch's strategies come from one descriptor: a drafter that shares forwards (eagle2) beside one of another kind is
// refused by name, in either order, not cast blindly.
TEST(BatchDecoder, StrategiesOfDifferentKindsAreRefused) {
  auto m = tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Native);
  auto vanilla = make_strategy("vanilla", StrategyContext{*m}, StrategyOptions{});
  auto eagle = make_strategy("eagle2", StrategyContext{*m}, StrategyOptions::parse({"total_tokens=4"}));
  GenerationConfig gen;
  gen.max_new_tokens = 4;
  for (bool eagle_first : {true, false}) {
    std::vector<DraftStrategy*> mixed{eagle.get(), vanilla.get()};
    if (!eagle_first) std::swap(mixed[0], mixed[1]);
    try {
      SpeculativeDecoder(*m, mixed).generate({{{1, 2, 3}, 0}, {{4, 5}, 1}}, gen);
      FAIL() << mixed[0]->name() << " beside " << mixed[1]->name() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("mixes strategies"), std::string::npos) << e.what();
    }
  }
}

// Batched drafting: two drafters on one head expanding in one forward give each the logits it gets alone (native
// path, bit for bit), for a root, a layer of children and a node deeper down.
TEST(BatchedDrafting, ExpandBatchEqualsEachDrafterAlone) {
  auto target = tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Native);
  std::shared_ptr<const EagleHead> head = EagleHead::random(*target, 3);
  const std::vector<std::vector<int64_t>> prompts{{5, 9, 2, 14, 3}, {7, 1, 30}};
  auto started = [&] {
    std::vector<std::unique_ptr<EagleDrafter>> drafters;
    for (const auto& p : prompts) {
      KvCache cache = target->make_cache(64);
      const auto out = target->forward_chain(cache, p);
      drafters.push_back(std::make_unique<EagleDrafter>(head));
      drafters.back()->begin(p, out.features, 11);
    }
    return drafters;
  };
  auto alone = started(), together = started();
  std::vector<std::vector<int64_t>> sequences;
  for (const auto& p : prompts) {
    sequences.push_back(p);
    sequences.back().push_back(11);
  }
  Sampler sampler(SamplingParams{});
  std::vector<DraftTree> trees_alone(2), trees_together(2);
  for (size_t i = 0; i < 2; ++i) {
    alone[i]->start_tree({sequences[i], 32, 32, sampler});
    together[i]->start_tree({sequences[i], 32, 32, sampler});
  }
  // Layer 1 from the roots (no head forward), layer 2 from two children each, layer 3 from one grandchild.
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<int32_t>> frontiers(2);
    for (size_t i = 0; i < 2; ++i) {
      if (step == 0) frontiers[i] = {EagleDrafter::kRoot};
      else if (step == 1) frontiers[i] = {0, 1};
      else frontiers[i] = {2};
    }
    std::vector<at::Tensor> want;
    for (size_t i = 0; i < 2; ++i) want.push_back(alone[i]->expand(trees_alone[i], frontiers[i]));
    const auto got = EagleDrafter::expand_batch({together[0].get(), together[1].get()},
                                                {&trees_together[0], &trees_together[1]}, frontiers);
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_TRUE(at::equal(got[i], want[i])) << "step " << step << " drafter " << i;
      // Grow both trees alike: the top two children of every expanded node.
      const auto c = top_candidates(want[i], 2);
      for (size_t f = 0; f < frontiers[i].size(); ++f)
        for (size_t r = 0; r < 2; ++r) {
          trees_alone[i].add(c[f].tokens[r], frontiers[i][f], c[f].probs[r]);
          trees_together[i].add(c[f].tokens[r], frontiers[i][f], c[f].probs[r]);
        }
    }
  }
  EXPECT_EQ(together[0]->head_forwards(), alone[0]->head_forwards());
}

}  // namespace
