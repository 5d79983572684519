// PARD (strategies/pard): COD's rows against their rule, the training forward against the inference forward at
// every (anchor, depth), the strategy's drafts against the training logits, and the objective learning. (That
// decoding with pard is lossless is tested for every strategy in test_lossless_*.)
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "core/model/training_forward.h"
#include "core/training/trainer.h"
#include "model/model_fixtures.h"
#include "strategies/pard/pard_training.h"
#include "strategies/registry.h"
#include "test_paths.h"

using namespace draftlab;

namespace {

ParallelDraftOptions options(int64_t k, double r, double r_min, int32_t mask = 5) {
  ParallelDraftOptions o;
  o.k = k;
  o.cod_ratio = r;
  o.cod_min_ratio = r_min;
  o.mask_token = mask;
  return o;
}

TEST(ParallelDraftRows, KeepCodsShareOfSuccessorsSoEveryMaskChainIsWhole) {
  const int64_t L = 100;
  for (uint64_t seed : {1u, 2u, 3u}) {
    const auto rows = parallel_draft_rows(L, options(8, 0.7, 0.2), seed);
    std::vector<std::set<int64_t>> kept(8);
    for (int64_t a = 0; a < rows.size(); ++a) kept[rows.copy[a]].insert(rows.position[a]);
    EXPECT_EQ(kept[0].size(), static_cast<size_t>(L));
    for (int64_t i = 1; i < 8; ++i) {
      // floor(L max(0.7^i, 0.2)), as PARD's int(L * max(r ** i, r_min)); successors past the window are not rows.
      const auto want = static_cast<size_t>(std::floor(L * std::max(std::pow(0.7, static_cast<double>(i)), 0.2)));
      EXPECT_LE(kept[i].size(), want) << "copy " << i;
      EXPECT_GE(kept[i].size() + static_cast<size_t>(i), std::min(want, kept[i - 1].size())) << "copy " << i;
      for (int64_t j : kept[i]) EXPECT_TRUE(kept[i - 1].count(j - 1)) << "copy " << i << " position " << j;
    }
  }
  // Another seed, other rows; no drop-off: every row with a real prefix (j >= i).
  EXPECT_NE(parallel_draft_rows(L, options(8, 0.7, 0.2), 1).position,
            parallel_draft_rows(L, options(8, 0.7, 0.2), 2).position);
  EXPECT_EQ(parallel_draft_rows(10, options(4, 1.0, 1.0), 9).size(), 10 + 9 + 8 + 7);
}

TEST(ParallelDraftRows, MaskLetsEachRowSeeItsRealPrefixAndItsMaskChainOnly) {
  ParallelDraftRows rows;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = i; j < 5; ++j) rows.copy.push_back(i), rows.position.push_back(j);
  const at::Tensor mask = parallel_draft_mask(rows);
  for (int64_t a = 0; a < rows.size(); ++a)
    for (int64_t b = 0; b < rows.size(); ++b) {
      const int64_t i = rows.copy[a], j = rows.position[a], ib = rows.copy[b], jb = rows.position[b];
      // Written out: the real token at jb is in the prefix; a mask row is the one slot ib of this row's chain.
      bool want = false;
      if (ib == 0) want = jb <= j - i;
      if (ib > 0 && ib <= i) want = jb - ib == j - i;
      EXPECT_EQ(mask[a][b].item<float>() == 0.0f, want) << "(" << i << "," << j << ") -> (" << ib << "," << jb << ")";
    }
}

// The training forward's row (i, j) equals the inference forward's mask slot i after the prefix x_0 .. x_{j-i},
// fed as the strategy feeds it (the prefix cached, then the last real token and the masks in one forward).
TEST(ParallelDraftTraining, TrainingForwardEqualsTheInferenceForwardAtEveryAnchorAndDepth) {
  const ModelConfig c = draftlab::testing::tiny_config(/*kv_heads=*/2, /*tied=*/true);
  const LlamaWeights w = draftlab::testing::scaled_test_weights(c, 3, at::kFloat);
  ComputeOptions reference;
  reference.cpu_path = CpuPath::Reference;
  const LlamaModel model(c, inference_weights(c, w), reference);
  const int64_t L = 12, K = 4;
  const int32_t mask = 5;
  at::manual_seed(0);
  const at::Tensor windows = at::randint(0, c.vocab_size, {2, L + 1}, at::kLong);
  const auto rows = parallel_draft_rows(L, options(K, 1.0, 1.0, mask), 0);
  const at::Tensor logits = parallel_draft_logits(c, w, RotaryEmbedding(c, reference), windows, rows, mask);
  int checked = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t anchor = 0; anchor + 1 < L; ++anchor) {  // the last real token's position
      KvCache cache = model.make_cache(L + K);
      std::vector<int64_t> prefix, fed;
      for (int64_t p = 0; p < anchor; ++p) prefix.push_back(windows[b][p].item<int64_t>());
      if (!prefix.empty()) model.forward_chain(cache, prefix, {});
      fed = {windows[b][anchor].item<int64_t>()};
      const int64_t depth = std::min(K, L - anchor);  // copies 0 .. depth-1 have a row at anchor + i
      fed.insert(fed.end(), static_cast<size_t>(depth - 1), mask);
      const at::Tensor inference = model.forward_chain(cache, fed, {}).logits;  // [depth, vocab]
      for (int64_t i = 0; i < depth; ++i) {
        int64_t row = -1;
        for (int64_t a = 0; a < rows.size(); ++a)
          if (rows.copy[a] == i && rows.position[a] == anchor + i) row = a;
        ASSERT_GE(row, 0);
        EXPECT_TRUE(at::allclose(logits[b][row], inference[i], 1e-4, 1e-4))
            << "batch " << b << " anchor " << anchor << " depth " << i << ": max difference "
            << (logits[b][row] - inference[i]).abs().max().item<float>();
        ++checked;
      }
    }
  EXPECT_EQ(checked, 2 * (9 * 4 + 3 + 2));  // anchors 0..8 with 4 rows, 9 with 3, 10 with 2
}

// The strategy's greedy drafts are the training forward's argmax at (i, n - 1 + i), on both CPU paths, cycle after
// cycle (its cache rolled back to the sequence each time), and k caps the chain.
TEST(ParallelDraftStrategy, DraftsTheTrainingForwardsArgmaxAtEachSlot) {
  const ModelConfig c = draftlab::testing::tiny_config(/*kv_heads=*/2, /*tied=*/true);
  const LlamaWeights w = draftlab::testing::scaled_test_weights(c, 4, at::kFloat);
  ComputeOptions reference;
  reference.cpu_path = CpuPath::Reference;
  const std::string dir = draftlab::testing::temp_dir() + "/pard-draft";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  LlamaModel(c, inference_weights(c, w), reference).save_hf(dir, at::kFloat);
  const int32_t mask = 7;
  const int64_t L = 20, K = 4;
  at::manual_seed(1);
  const at::Tensor window = at::randint(0, c.vocab_size, {1, L + 1}, at::kLong);
  const auto rows = parallel_draft_rows(L, options(K, 1.0, 1.0, mask), 0);
  const at::Tensor logits = parallel_draft_logits(c, w, RotaryEmbedding(c, reference), window, rows, mask)[0];
  for (CpuPath path : {CpuPath::Reference, CpuPath::Auto}) {
    ComputeOptions o;
    o.cpu_path = path;
    const auto target = LlamaModel::load(dir, o);  // the draft as its own target: only its drafts matter here
    auto pard = make_strategy("pard", StrategyContext{*target},
                              StrategyOptions::parse({"draft=" + dir, "k=4", "mask_token=" + std::to_string(mask)}));
    std::vector<int64_t> seq{window[0][0].item<int64_t>(), window[0][1].item<int64_t>()};
    pard->begin({seq[0]}, {}, 0);
    Sampler greedy{SamplingParams{}};
    for (int64_t n = 2; n + K <= L; ++n) {
      const DraftTree tree = propose_one(*pard, DraftRequest{seq, 100, 100, greedy});
      ASSERT_EQ(tree.size(), K);
      for (int64_t i = 0; i < K; ++i) {
        int64_t row = -1;
        for (int64_t a = 0; a < rows.size(); ++a)
          if (rows.copy[a] == i && rows.position[a] == n - 1 + i) row = a;
        EXPECT_EQ(tree.node(static_cast<int32_t>(i)).token, logits[row].argmax().item<int64_t>())
            << "sequence length " << n << " slot " << i;
        EXPECT_EQ(tree.node(static_cast<int32_t>(i)).parent, i - 1);
      }
      // One accepted draft, whatever it was: the sequence grows by the window's next token.
      VerifyResult result;
      result.accepted_nodes = {0};
      observe_one(*pard, result);
      seq.push_back(window[0][n].item<int64_t>());
    }
    EXPECT_EQ(propose_one(*pard, DraftRequest{seq, 100, 2, greedy}).size(), 2);  // tokens_wanted caps it
  }
  std::filesystem::remove_all(dir);
}

TEST(ParallelDraftStrategy, RefusesADraftWithoutAMaskToken) {
  const auto target = draftlab::testing::tiny_model();
  const std::string dir = draftlab::testing::temp_dir() + "/plain-draft";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  target->save_hf(dir, at::kFloat);
  try {
    make_strategy("pard", StrategyContext{*target}, StrategyOptions::parse({"draft=" + dir}));
    FAIL() << "a draft without pard_token was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pard_token"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(ParallelDraftTraining, TheObjectiveLearnsToPredictSeveralTokensAhead) {
  // A stream with a period of 7 tokens: after training, mask slots predict the tokens 2..4 ahead.
  std::vector<int32_t> train, validation;
  for (int i = 0; i < 4000; ++i) train.push_back(10 + (i % 7) * 3);
  for (int i = 0; i < 400; ++i) validation.push_back(10 + (i % 7) * 3);
  const TextDataset data(train, validation);
  LmTrainingOptions o;
  o.config = draftlab::testing::tiny_config(2, /*tied=*/true);
  o.context = 24;
  o.batch = 4;
  o.trainer.steps = 60;
  o.trainer.lr = 3e-3;
  o.trainer.warmup = 5;
  o.trainer.eval_every = 60;
  o.trainer.quiet = true;
  o.out_dir = draftlab::testing::temp_dir() + "/pard-train";
  std::filesystem::remove_all(o.out_dir);
  ParallelDraftOptions pard = options(4, 0.7, 0.2, 90);
  o.config.pard_token = pard.mask_token;
  o.objective = std::make_shared<ParallelDraftObjective>(pard);
  const auto result = train_language_model(o, data);
  ASSERT_FALSE(result.curves.eval_loss.empty());
  EXPECT_LT(result.curves.eval_loss.back(), 0.5) << "validation loss of every kept slot";
  // The saved model drafts the period's next four tokens from a prefix, in one forward.
  const auto model = LlamaModel::load(o.out_dir, ComputeOptions{});
  EXPECT_EQ(model->config().pard_token, 90);
  auto strategy = make_strategy("pard", StrategyContext{*model}, StrategyOptions::parse({"draft=" + o.out_dir}));
  std::vector<int64_t> seq;
  for (int i = 0; i < 9; ++i) seq.push_back(10 + (i % 7) * 3);
  strategy->begin({seq.begin(), seq.end() - 1}, {}, 0);
  Sampler greedy{SamplingParams{}};
  const DraftTree tree = propose_one(*strategy, DraftRequest{seq, 100, 100, greedy});
  ASSERT_EQ(tree.size(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(tree.node(i).token, 10 + ((9 + i) % 7) * 3) << "slot " << i;
  std::filesystem::remove_all(o.out_dir);
}

// PARD-2's loss (train-lm --teacher) written out row by row in double precision: the teacher's distributions from
// its inference forward (KV cache), CAT's product of its probabilities of x_{j-i+1} .. x_j, CE and KL per row, the
// weighted mean. Without CAT and with CE alone it is PARD's own objective.
TEST(ParallelDraftTraining, TeacherLossIsTheCatWeightedCrossEntropyAndKlOfEveryRow) {
  const ModelConfig c = draftlab::testing::tiny_config(2, /*tied=*/true);
  const LlamaWeights w = draftlab::testing::scaled_test_weights(c, 3, at::kFloat);
  ComputeOptions reference;
  reference.cpu_path = CpuPath::Reference;
  auto teacher = std::make_shared<ParallelDraftTeacher>();
  teacher->target = std::make_shared<LlamaModel>(
      c, inference_weights(c, draftlab::testing::scaled_test_weights(c, 11, at::kFloat)), reference);
  teacher->path = "test teacher";
  const int64_t L = 10, B = 2;
  const int32_t mask = 5;
  at::manual_seed(1);
  const at::Tensor windows = at::randint(0, c.vocab_size, {B, L + 1}, at::kLong);
  const ParallelDraftOptions o = options(3, 0.7, 0.2, mask);
  const uint64_t seed = 4;
  const RotaryEmbedding rope(c, reference);
  const double got = ParallelDraftObjective(o, teacher).loss(c, w, rope, windows, seed).item<double>();

  const auto rows = parallel_draft_rows(L, o, seed);
  ASSERT_GT(rows.size(), L + 4);  // mask rows of both copies
  const at::Tensor draft = parallel_draft_logits(c, w, rope, windows, rows, mask).to(at::kDouble).log_softmax(-1);
  double num = 0, den = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int64_t> x;
    for (int64_t t = 0; t <= L; ++t) x.push_back(windows[b][t].item<int64_t>());
    KvCache cache = teacher->target->make_cache(L);
    // after[j]: the teacher's log-distribution of the token after x_0 .. x_j.
    const at::Tensor after =
        teacher->target->forward_chain(cache, {x.begin(), x.begin() + L}, {}).logits.to(at::kDouble).log_softmax(-1);
    for (int64_t a = 0; a < rows.size(); ++a) {
      const int64_t i = rows.copy[a], j = rows.position[a];
      double weight = 1;
      for (int64_t t = j - i + 1; t <= j; ++t) weight *= std::exp(after[t - 1][x[t]].item<double>());
      const at::Tensor lq = draft[b][a], lp = after[j];
      const double ce = -lq[x[j + 1]].item<double>();
      const double kl = (lp.exp() * (lp - lq)).sum().item<double>();
      num += weight * (0.1 * ce + 1.0 * kl);
      den += weight;
    }
  }
  EXPECT_NEAR(got, num / den, 1e-4 * std::abs(num / den));

  auto plain = std::make_shared<ParallelDraftTeacher>(*teacher);
  plain->cat = false;
  plain->ce_weight = 1;
  plain->kd_weight = 0;
  EXPECT_NEAR(ParallelDraftObjective(o, plain).loss(c, w, rope, windows, seed).item<double>(),
              ParallelDraftObjective(o).loss(c, w, rope, windows, seed).item<double>(), 1e-5);

  // A teacher of another vocabulary is refused, naming it.
  auto other = std::make_shared<ParallelDraftTeacher>(*teacher);
  const ModelConfig c50 = draftlab::testing::tiny_config(2, true, 50);
  other->target = std::make_shared<LlamaModel>(c50, inference_weights(c50, draftlab::testing::scaled_test_weights(c50, 1, at::kFloat)),
                                               reference);
  try {
    ParallelDraftObjective(o, other).loss(c, w, rope, windows, seed);
    ADD_FAILURE() << "a teacher of vocab_size 50 for a draft of 97 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--teacher test teacher: vocab_size 50, expected the draft's 97"), std::string::npos)
        << e.what();
  }
}

TEST(ParallelDraftTraining, UnusedTokenIsTheHighestAbsentId) {
  EXPECT_EQ(unused_token({3, 0, 5, 0, 1}), 3);
  EXPECT_EQ(unused_token({0, 2}), 0);
  EXPECT_THROW(unused_token({1, 1}), Error);
}

}  // namespace
