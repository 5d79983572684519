// EAGLE-3 training with training-time test: the TTT loss's gradients against central finite differences (float64),
// the unrolled masked forward against K sequential forwards of the inference head, a tiny head overfitting one
// batch, the draft vocabulary, n-alpha against a naive chain rollout, and a run through train_draft_head that
// resumes exactly and writes a head that loads.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/base/error.h"
#include "strategies/eagle3/eagle3_head.h"
#include "strategies/eagle3/eagle3_training.h"
#include "core/training/draft_vocabulary.h"
#include "core/training/text_dataset.h"
#include "finite_differences.h"
#include "model_fixtures.h"
#include "test_errors.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using testing::long_tensor;
using testing::rel_diff;
using testing::expect_error;

at::Tensor random_windows(int64_t batch, int64_t length, int64_t vocab, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randint(vocab, {batch, length}, gen, at::TensorOptions().dtype(at::kLong));
}

// Scales a training model's leaves up so that its outputs vary (std 0.02 makes every input look alike).
void liven(Eagle3TrainingModel& model, uint64_t seed) {
  at::NoGradGuard g;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (const auto& [name, p] : model.parameters())
    p.add_(at::normal(0.0, 0.3, p.sizes(), gen, at::TensorOptions().dtype(at::kFloat)).to(p.scalar_type()));
}

// A target with at least three layers' worth of features (tiny_config has 2: the head reads layer 1's input thrice).
std::unique_ptr<LlamaModel> small_target(at::ScalarType dtype = at::kFloat, CpuPath path = CpuPath::Auto) {
  ModelConfig c = testing::tiny_config();
  c.num_hidden_layers = 4;
  ComputeOptions o;
  o.dtype = dtype;
  o.cpu_path = path;
  return std::make_unique<LlamaModel>(c, testing::scaled_test_weights(c, 3, dtype), o);
}

HeadBatch batch_of(const LlamaModel& target, const Eagle3TrainingModel& model, const at::Tensor& windows,
                   const at::Tensor& mask = {}) {
  return {windows, mask, head_batch_features(target, windows, model.feature_layers())};
}

// The TTT loss against its written-out formula (eagle3_training.h), computed here by plain loops over a 2 x 3
// window with K = 3 steps: teacher p = softmax of the target's logits z_{j+1+k} restricted to the draft vocabulary
// and renormalised; row j of step k counts iff j + 1 + k <= T, the loss mask holds at the predicted token
// (mask[j + 2 + k], mask[T] past the end) and the target's full-vocabulary top-1 at j + 1 + k is a draft id; loss =
// sum_k decay^k (-1 / (B T)) sum_{b, j} counted * sum_v p_v log q_v, q the step's draft softmax. The head's logits
// come from unroll (checked against the inference head by UnrolledMaskedForwardEqualsSequentialInferenceForwards);
// everything else is re-derived from the features.
TEST(Eagle3Training, TttLossEqualsTheHandComputedFormulaOnATinyWindow) {
  const auto target = small_target();
  const int64_t B = 2, T = 3, V = target->config().vocab_size, d = target->config().hidden_size;
  const int K = 3;
  const double decay = 0.7;
  const at::Tensor windows = random_windows(B, T + 1, V, 41);
  const at::Tensor probe_features = head_batch_features(*target, windows, Eagle3TrainingModel(*target, 5).feature_layers());
  // The target's logits at every window position, and its full-vocabulary top-1.
  const at::Tensor z = at::matmul(probe_features.narrow(2, 3 * d, d).to(at::kDouble),
                                  target->weights().lm_head.to(at::kDouble).t());  // [B, T + 1, V]
  const at::Tensor top = z.argmax(-1);
  // A draft vocabulary of 12 ids holding the top-1 of some positions and not of others (the in-vocabulary rule).
  std::vector<int64_t> ids;
  std::vector<bool> in(V, false);
  const int64_t excluded = top[0][2].item<int64_t>();  // every position whose top-1 this is stops counting
  for (int64_t i = 0; i < top.numel(); ++i) {
    const int64_t v = top.flatten()[i].item<int64_t>();
    if (v != excluded && !in[v]) ids.push_back(v), in[v] = true;
  }
  for (int64_t v = 3; v < V && ids.size() < 12; v += 7)
    if (v != excluded && !in[v]) ids.push_back(v), in[v] = true;
  std::sort(ids.begin(), ids.end());
  Eagle3TrainingModel model(*target, 5, long_tensor(ids), K, decay);
  liven(model, 6);
  // The loss mask: position 2 of row 1 does not count (the rows that predict it, at every step).
  const at::Tensor mask = at::ones({B, T + 1}, at::kLong);
  mask[1][2] = 0;
  const HeadBatch batch = batch_of(*target, model, windows, mask);
  const double got = model.ttt_loss(batch).loss.item<double>();

  at::NoGradGuard no_grad;
  const auto u = model.unroll(windows, batch.features.narrow(2, 0, 3 * d), K);
  const int64_t Vd = static_cast<int64_t>(ids.size());
  double want = 0;
  int counted_rows = 0, excluded_by_vocabulary = 0, excluded_by_mask = 0;
  for (int k = 0; k < K; ++k) {
    double step = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < T; ++j) {
        const int64_t at = j + 1 + k;  // the teacher's position: the target's distribution of w_{at + 1}
        if (at > T) continue;
        const int64_t predicted = std::min<int64_t>(j + 2 + k, T);
        if (mask[b][predicted].item<int64_t>() == 0) {
          ++excluded_by_mask;
          continue;
        }
        if (!in[top[b][at].item<int64_t>()]) {
          ++excluded_by_vocabulary;
          continue;
        }
        ++counted_rows;
        // Teacher: softmax over the draft ids of z; student: log-softmax of the step's draft logits.
        double zmax = -1e300, lmax = -1e300;
        for (int64_t v = 0; v < Vd; ++v) {
          zmax = std::max(zmax, z[b][at][ids[v]].item<double>());
          lmax = std::max(lmax, u.logits[k][b][j][v].item<double>());
        }
        double zsum = 0, lsum = 0;
        for (int64_t v = 0; v < Vd; ++v) {
          zsum += std::exp(z[b][at][ids[v]].item<double>() - zmax);
          lsum += std::exp(u.logits[k][b][j][v].item<double>() - lmax);
        }
        double cross = 0;
        for (int64_t v = 0; v < Vd; ++v) {
          const double p = std::exp(z[b][at][ids[v]].item<double>() - zmax) / zsum;
          const double log_q = u.logits[k][b][j][v].item<double>() - lmax - std::log(lsum);
          cross += p * log_q;
        }
        step -= cross;
      }
    want += std::pow(decay, k) * step / static_cast<double>(B * T);
  }
  ASSERT_GT(counted_rows, 0) << "tops " << top;
  ASSERT_GT(excluded_by_vocabulary, 0) << "no row tests the in-vocabulary rule";
  ASSERT_GT(excluded_by_mask, 0) << "no row tests the loss mask";
  EXPECT_NEAR(got, want, 1e-5 * std::abs(want)) << "counted " << counted_rows << " rows";
}

TEST(Eagle3Training, GradientsMatchCentralFiniteDifferencesInFloat64) {
  ModelConfig c = testing::tiny_config();
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 13;
  c.num_hidden_layers = 3;
  c.max_position_embeddings = 24;
  ComputeOptions o;
  o.dtype = at::kDouble;
  LlamaWeights tw = random_llama_weights(c, 3, o);
  tw.embed = tw.embed * 30.0;
  tw.lm_head = tw.lm_head * 30.0;
  LlamaModel target(c, std::move(tw), o);
  const auto windows = random_windows(2, 7, 13, 4);
  auto mask = at::ones({2, 7}, at::kFloat);
  mask[1][3] = 0;
  for (bool eagle31 : {false, true})
    for (bool reduced : {false, true}) {
      SCOPED_TRACE(std::string(reduced ? "reduced vocabulary" : "full vocabulary") + (eagle31 ? ", EAGLE-3.1" : ""));
      Eagle3TrainingModel model(target, 1, reduced ? long_tensor({0, 2, 3, 7, 11}) : at::Tensor(), /*steps=*/3, 0.8,
                                {}, eagle31);
      liven(model, 2);
      const HeadBatch batch = batch_of(target, model, windows, mask);
      // Three elements of each parameter: 10 tensors, 13 with EAGLE-3.1's three fc norms.
      EXPECT_EQ(testing::expect_gradients_match_central_differences(model.parameters(),
                                                                    [&] { return model.ttt_loss(batch).loss; }),
                eagle31 ? 39 : 30);
    }
}

// The unrolled masked forward is K sequential forwards of the inference head: the window's T pairs committed to
// its KV cache (step 0), then for each start row j a chain of draft rows fed back the previous output (raw; EAGLE-3.1:
// normed), each seeing the committed rows 0..j and its own chain (the inference tree's visibility). Both variants,
// both CPU paths of the inference head.
class Eagle3TrainingVariant : public ::testing::TestWithParam<std::tuple<bool, CpuPath>> {};

TEST_P(Eagle3TrainingVariant, UnrolledMaskedForwardEqualsSequentialInferenceForwards) {
  const auto [eagle31, path] = GetParam();
  auto target = small_target(at::kFloat, path);
  Eagle3TrainingModel model(*target, 3, long_tensor({1, 4, 9, 20, 33, 50, 70, 96}), /*steps=*/4, 0.8, {}, eagle31);
  liven(model, 4);
  const int64_t T = 6, K = 4, d = target->config().hidden_size;
  const auto windows = random_windows(1, T + 1, 97, 5);
  const HeadBatch batch = batch_of(*target, model, windows);
  at::NoGradGuard no_grad;
  const auto unrolled = model.unroll(windows, batch.features.narrow(2, 0, 3 * d), K);
  const auto head = model.to_head();
  const auto G = batch.features[0].narrow(1, 0, 3 * d);
  for (int64_t j = 0; j < T; ++j) {
    KvCache cache = head->make_cache(T + K);
    auto out = head->forward(cache, windows[0].narrow(0, 1, T), G.narrow(0, 0, T), at::arange(T, at::kLong));
    EXPECT_LT(rel_diff(out[j], unrolled.outputs[0][0][j]), 1e-5) << "row " << j << " step 0";
    at::Tensor prev = out.narrow(0, j, 1);
    for (int64_t k = 1; k < K && j + 1 + k <= T; ++k) {
      const int64_t len = cache.length();
      auto visible = at::zeros({1, len + 1}, at::kBool);
      visible.narrow(1, 0, j + 1).fill_(true);                  // committed rows 0..j
      visible.narrow(1, T, len - T + 1).fill_(true);            // this chain's earlier draft rows and itself
      prev = head->forward_visible(cache, windows[0].narrow(0, j + 1 + k, 1), prev, long_tensor({j + k}), visible);
      EXPECT_LT(rel_diff(prev[0], unrolled.outputs[k][0][j]), 1e-5) << "row " << j << " step " << k;
      EXPECT_LT(rel_diff(head->draft_logits(prev)[0], unrolled.logits[k][0][j]), 1e-4) << "row " << j << " step " << k;
    }
  }
  EXPECT_EQ(head->is_eagle31(), eagle31);
}

INSTANTIATE_TEST_SUITE_P(Variants, Eagle3TrainingVariant,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(CpuPath::Reference, CpuPath::Native)),
                         [](const ::testing::TestParamInfo<std::tuple<bool, CpuPath>>& info) {
                           return std::string(std::get<0>(info.param) ? "eagle31_" : "eagle3_") +
                                  (std::get<1>(info.param) == CpuPath::Native ? "native" : "reference");
                         });

TEST(Eagle3Training, ATinyHeadOverfitsOneBatch) {
  auto target = small_target();
  const auto windows = random_windows(2, 13, 97, 11);
  Eagle3TrainingModel model(*target, 5);
  const HeadBatch batch = batch_of(*target, model, windows);
  TrainerOptions t;
  t.steps = 150;
  t.lr = 3e-3;
  t.warmup = 10;
  t.weight_decay = 0;
  t.grad_clip = 0.5;
  t.eval_every = 0;
  t.quiet = true;
  Trainer trainer(model.parameters(), t);
  const double first = model.ttt_loss(batch).loss.item<double>();
  for (int64_t s = 0; s < t.steps; ++s) trainer.train_step([&] { return model.loss(batch, s); });
  const auto last = model.ttt_loss(batch, true);
  // A head that memorises the batch drives every step's soft cross-entropy towards the teacher's entropy.
  EXPECT_LT(last.loss.item<double>(), first / 3) << "start " << first;
  EXPECT_GT(static_cast<double>(last.correct) / static_cast<double>(last.count), 0.9);
}

// n-alpha counted in the unrolled forward against a rollout written out here: per start row, the head's own
// outputs fed back one token at a time, counting while the head's top-1 equals the target's.
TEST(Eagle3Training, AlphaIsTheCumulativeChainAgreement) {
  auto target = small_target();
  Eagle3TrainingModel model(*target, 7, at::Tensor(), /*steps=*/4);
  const int64_t T = 9, d = target->config().hidden_size;
  const auto windows = random_windows(2, T + 1, 97, 12);
  auto mask = at::ones({2, T + 1}, at::kFloat);
  mask[0][5] = 0;
  const HeadBatch batch = batch_of(*target, model, windows, mask);
  {  // fitted to the batch for a while, so that chains agree for several steps and every n is exercised
    TrainerOptions t;
    t.steps = 60;
    t.lr = 3e-3;
    t.warmup = 5;
    t.weight_decay = 0;
    t.eval_every = 0;
    t.quiet = true;
    Trainer trainer(model.parameters(), t);
    for (int64_t s = 0; s < t.steps; ++s) trainer.train_step([&] { return model.loss(batch, s); });
  }
  at::NoGradGuard no_grad;
  const auto l = model.ttt_loss(batch, /*with_alpha=*/true);
  const auto u = model.unroll(windows, batch.features.narrow(2, 0, 3 * d), Eagle3TrainingModel::kAlphaSteps);
  const auto z = at::matmul(batch.features.narrow(2, 3 * d, d), target->weights().lm_head.t());  // [B, T+1, V]
  int64_t tried[Eagle3TrainingModel::kAlphaSteps] = {}, agreed[Eagle3TrainingModel::kAlphaSteps] = {};
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < T; ++j)
      for (int64_t n = 0; n < Eagle3TrainingModel::kAlphaSteps && j + 1 + n <= T; ++n) {
        const int64_t predicted = std::min<int64_t>(j + 2 + n, T);  // the token row j predicts at step n
        if (mask[b][predicted].item<float>() == 0) break;
        ++tried[n];
        const int64_t want = z[b][j + 1 + n].argmax().item<int64_t>();
        if (u.logits[n][b][j].argmax().item<int64_t>() != want) break;
        ++agreed[n];
      }
  for (int n = 0; n < Eagle3TrainingModel::kAlphaSteps; ++n) {
    EXPECT_EQ(l.tried[n], tried[n]) << n;
    EXPECT_EQ(l.agreed[n], agreed[n]) << n;
  }
  EXPECT_EQ(l.correct, agreed[0]);
  EXPECT_GT(agreed[3], 0);
  EXPECT_LT(agreed[5], tried[0]);  // not every row agrees all the way: the count is not trivially full
}

TEST(Eagle3Training, DraftVocabularyIsTheMostFrequentPredictedTokens) {
  // Stories made of token runs: 5 occurs most, then 7, then 3; ids never seen are never chosen.
  std::vector<int32_t> stream;
  for (int r = 0; r < 20; ++r)
    for (int32_t t : {5, 5, 5, 5, 7, 7, 7, 3, 3, 5, 5, 7, 5, 5, 7, 3, 9, 5, 5, 7}) stream.push_back(t);
  const TextDataset data(stream, stream);
  HeadTrainingOptions o;
  o.batch = 2;
  o.context = 6;
  o.trainer.steps = 4;
  const auto ids = training_draft_vocabulary(data, o, 97, 2, DraftVocabularyCount::PredictedTokens);
  ASSERT_TRUE(ids.defined());
  EXPECT_TRUE(at::equal(ids, long_tensor({5, 7})));
  EXPECT_FALSE(training_draft_vocabulary(data, o, 97, 0, DraftVocabularyCount::PredictedTokens).defined());
  EXPECT_FALSE(training_draft_vocabulary(data, o, 97, 97, DraftVocabularyCount::PredictedTokens).defined());
  expect_error([&] { training_draft_vocabulary(data, o, 97, 98, DraftVocabularyCount::PredictedTokens); },
               {"--draft-vocab", "0..97"});
}

TEST(Eagle3Training, TrainsThroughTheSharedPipelineResumesExactlyAndLoads) {
  auto target = small_target();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(21);
  const auto t = at::randint(60, {1600}, gen, at::TensorOptions().dtype(at::kLong));
  std::vector<int32_t> train(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + 1200);
  std::vector<int32_t> val(t.data_ptr<int64_t>() + 1200, t.data_ptr<int64_t>() + 1600);
  const TextDataset data(std::move(train), std::move(val));
  Eagle3TrainingOptions o;
  o.batch = 4;
  o.context = 12;
  o.eval_windows = 4;
  o.draft_vocab = 40;
  o.steps = 3;
  o.trainer.steps = 6;
  o.trainer.warmup = 2;
  o.trainer.eval_every = 3;
  o.trainer.quiet = true;
  o.out_dir = testing::fresh_dir("eagle3_training_run");
  const auto full = train_eagle3_head(*target, o, data);
  ASSERT_NE(full.curves.metric("alpha"), nullptr);
  EXPECT_EQ(full.curves.metric("alpha")->size(), full.curves.eval_loss.size());
  EXPECT_EQ(full.curves.metric("alpha")->back().size(), 8u);  // 0-alpha .. 7-alpha
  EXPECT_DOUBLE_EQ(full.curves.metric("alpha")->back()[0], full.curves.metric("accuracy")->back()[0]);
  const auto head = Eagle3Head::load(o.out_dir, *target);
  EXPECT_EQ(head->draft_vocab_size(), 40);
  EXPECT_LT(head->draft_ids().max().item<int64_t>(), 60);  // only ids the data contains
  const auto log = read_training_log(o.out_dir + "/training_log.h5");
  EXPECT_EQ(log.eval_metrics, full.curves.eval_metrics);
  EXPECT_EQ(log.attributes.at("family"), "eagle3");

  Eagle3TrainingOptions split = o;
  split.out_dir = testing::fresh_dir("eagle3_training_split");
  split.trainer.stop_at = 3;
  train_eagle3_head(*target, split, data);
  split.trainer.stop_at = 0;
  split.resume = true;
  const auto resumed = train_eagle3_head(*target, split, data);
  EXPECT_EQ(resumed.curves.train_loss, full.curves.train_loss);
  EXPECT_EQ(resumed.curves.eval_metrics, full.curves.eval_metrics);
  split.steps = 5;  // another run's state
  expect_error([&] { train_eagle3_head(*target, split, data); }, {"metadata ttt_steps", "'5'", "'3'"});
}

}  // namespace
}  // namespace draftlab
