// Medusa head training: the parallel-head loss against per-head cross-entropies computed by hand in double
// precision (hard labels, a loss mask, the soft target-distribution variant), and a short run on ts-tiny that
// lowers the validation loss, writes a folder MedusaHeads::load reads back bit for bit, and resumes exactly.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <filesystem>

#include "core/base/error.h"
#include "core/decoding/vanilla_decoder.h"
#include "strategies/medusa/medusa_heads.h"
#include "core/model/rope.h"
#include "core/model/training_forward.h"
#include "strategies/hydra/hydra_training.h"
#include "strategies/medusa/medusa_training.h"
#include "core/training/training_log.h"
#include "model_fixtures.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using testing::fresh_dir;

// Row-major double copy of a matrix, read as m[r * cols + c].
std::vector<double> doubles(const at::Tensor& t) {
  auto c = t.detach().to(at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// Head k's logits at one feature row, one scalar at a time.
std::vector<double> head_logits(const MedusaHeadWeights& w, int64_t k, const std::vector<double>& f,
                                const at::Tensor& target_lm_head) {
  const auto d = static_cast<int64_t>(f.size());
  std::vector<double> h = f;
  for (const auto& block : w.blocks[k]) {
    const auto W = doubles(block.weight), b = doubles(block.bias);
    std::vector<double> y(d);
    for (int64_t i = 0; i < d; ++i) {
      double s = b[i];
      for (int64_t j = 0; j < d; ++j) s += W[i * d + j] * h[j];
      y[i] = s / (1.0 + std::exp(-s));
    }
    for (int64_t i = 0; i < d; ++i) h[i] += y[i];
  }
  const auto L = doubles(w.lm_heads.empty() ? target_lm_head : w.lm_heads[k]);
  const int64_t V = static_cast<int64_t>(L.size()) / d;
  std::vector<double> out(V, 0.0);
  for (int64_t v = 0; v < V; ++v)
    for (int64_t i = 0; i < d; ++i) out[v] += L[v * d + i] * h[i];
  return out;
}

double log_sum_exp(const std::vector<double>& x) {
  double m = x[0], s = 0;
  for (double v : x) m = std::max(m, v);
  for (double v : x) s += std::exp(v - m);
  return m + std::log(s);
}

struct NaiveLoss {
  double total = 0;
  std::vector<double> per_head;
  std::vector<int64_t> correct, count;
};

// sum_k 0.8^(k+1) * mean over counted rows of CE(head k at f[b][i], w[b][i+k+2]) (soft: against softmax of the
// target's logits at f[b][i+k+1]).
NaiveLoss naive_loss(const MedusaHeadWeights& w, int64_t heads, const at::Tensor& windows, const at::Tensor& f,
                     const at::Tensor& lm_head, const at::Tensor& mask, bool soft) {
  const int64_t B = windows.size(0), T = windows.size(1) - 1, d = f.size(2);
  const auto fd = doubles(f), L = doubles(lm_head);
  const int64_t V = lm_head.size(0);
  auto row = [&](int64_t b, int64_t i) {
    return std::vector<double>(fd.begin() + (b * (T + 1) + i) * d, fd.begin() + (b * (T + 1) + i + 1) * d);
  };
  NaiveLoss out;
  for (int64_t k = 0; k < heads; ++k) {
    double sum = 0;
    int64_t rows = 0, correct = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i + k + 2 <= T; ++i) {
        if (mask.defined() && mask[b][i + k + 2].item<double>() == 0) continue;
        const auto logits = head_logits(w, k, row(b, i), lm_head);
        const double lse = log_sum_exp(logits);
        const int64_t label = windows[b][i + k + 2].item<int64_t>();
        if (!soft) {
          sum += lse - logits[label];
        } else {
          const auto g = row(b, i + k + 1);
          std::vector<double> t(V, 0.0);
          for (int64_t v = 0; v < V; ++v)
            for (int64_t j = 0; j < d; ++j) t[v] += L[v * d + j] * g[j];
          const double tl = log_sum_exp(t);
          for (int64_t v = 0; v < V; ++v) sum -= std::exp(t[v] - tl) * (logits[v] - lse);
        }
        correct += std::max_element(logits.begin(), logits.end()) - logits.begin() == label;
        ++rows;
      }
    const double ce = rows ? sum / static_cast<double>(rows) : 0.0;
    out.per_head.push_back(ce);
    out.correct.push_back(correct);
    out.count.push_back(rows);
    out.total += std::pow(0.8, static_cast<double>(k + 1)) * ce;
  }
  return out;
}

TEST(MedusaTraining, LossEqualsPerHeadCrossEntropiesComputedByHand) {
  auto target = testing::tiny_model();
  MedusaConfig c;
  c.num_heads = 3;
  c.num_layers = 2;
  for (bool own : {false, true}) {
    c.own_lm_head = own;
    MedusaTrainingModel model(*target, 4, c);
    {  // blocks away from the zero init, so that every weight matters
      at::NoGradGuard no_grad;
      auto gen = at::make_generator<at::CPUGeneratorImpl>(8);
      for (auto& [name, p] : model.parameters())
        if (name.find("lm_head") == std::string::npos) p.copy_(at::randn(p.sizes(), gen) * 0.2);
    }
    for (auto& [name, p] : model.parameters()) p.requires_grad_(true);  // as the Trainer sets them
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
    const auto windows = at::randint(97, {2, 10}, gen, at::TensorOptions().dtype(at::kLong));
    at::Tensor f;
    {
      at::NoGradGuard no_grad;
      const RotaryEmbedding rope(target->config(), target->options());
      f = training_features(target->config(), target->weights(), rope, windows);
    }
    auto mask = at::ones({2, 10});
    mask[0][5] = 0;
    mask[1][9] = 0;
    mask[1][2] = 0;
    for (bool soft : {false, true})
      for (bool masked : {false, true}) {
        SCOPED_TRACE(std::string(own ? "own" : "shared") + (soft ? ", soft" : ", tokens") + (masked ? ", masked" : ""));
        ParallelHeadLossOptions o;
        o.target = soft ? ParallelHeadTarget::TargetDistribution : ParallelHeadTarget::Tokens;
        const at::Tensor m = masked ? mask : at::Tensor();
        const auto got = parallel_head_loss(model.logits(windows, f), windows, m, f, target->weights().lm_head, o);
        const auto want = naive_loss(model.weights(), 3, windows, f, target->weights().lm_head, m, soft);
        EXPECT_NEAR(got.loss.item<double>(), want.total, 1e-4 * std::abs(want.total));
        for (int k = 0; k < 3; ++k) {
          EXPECT_NEAR(got.head_loss[k], want.per_head[k], 1e-4 * std::abs(want.per_head[k])) << "head " << k;
          EXPECT_EQ(got.correct[k], want.correct[k]) << "head " << k;
          EXPECT_EQ(got.count[k], want.count[k]) << "head " << k;
        }
        EXPECT_TRUE(got.loss.requires_grad());
      }
  }
  // decay 1: the unweighted sum.
  MedusaTrainingModel model(*target, 4, c);
  const auto windows = at::randint(97, {1, 6}, at::TensorOptions().dtype(at::kLong));
  const RotaryEmbedding rope(target->config(), target->options());
  const auto f = training_features(target->config(), target->weights(), rope, windows).detach();
  ParallelHeadLossOptions flat;
  flat.decay = 1.0;
  const auto l = parallel_head_loss(model.logits(windows, f), windows, {}, f, target->weights().lm_head, flat);
  EXPECT_NEAR(l.loss.item<double>(), l.head_loss[0] + l.head_loss[1] + l.head_loss[2], 1e-5);
  EXPECT_THROW(model.logits(windows.narrow(1, 0, 4), f.narrow(1, 0, 4)), Error);  // no label for head 2
}

TEST(MedusaTraining, AShortRunOnTsTinyLowersTheLossAndItsFolderLoadsAndResumes) {
  const std::string model_dir = testing::source_path("data/models/ts-tiny");
  ASSERT_TRUE(testing::exists(model_dir + "/model.safetensors"));
  const auto target = LlamaModel::load(model_dir, ComputeOptions{});
  const TextDataset data = testing::target_generated_dataset(*target);
  const ParallelHeadTrainingOptions o = testing::short_parallel_head_run(fresh_dir("medusa_run"));
  MedusaConfig c;
  c.num_heads = 3;
  MedusaTrainingModel heads(*target, 0, c);
  const auto r = train_parallel_heads(*target, heads, o, data);
  ASSERT_EQ(r.curves.eval_loss.size(), 2u);  // before the first step and after the last
  ASSERT_NE(r.curves.metric("head_accuracy"), nullptr);
  ASSERT_EQ(r.curves.metric("head_accuracy")->size(), 2u);
  std::cout << "validation loss " << r.curves.eval_loss.front() << " -> " << r.curves.eval_loss.back()
            << ", head 0 top-1 " << r.curves.metric("head_accuracy")->front()[0] << " -> "
            << r.curves.metric("head_accuracy")->back()[0] << "\n";
  EXPECT_LT(r.curves.eval_loss.back(), 0.9 * r.curves.eval_loss.front())
      << r.curves.eval_loss.front() << " -> " << r.curves.eval_loss.back();
  ASSERT_EQ(r.curves.metric("head_accuracy")->back().size(), 3u);
  EXPECT_GT(r.curves.metric("head_accuracy")->back()[0], r.curves.metric("head_accuracy")->front()[0]);
  EXPECT_EQ(r.parameters, 3 * (128 * 128 + 128));
  const TrainingCurves log = read_training_log(o.out_dir + "/training_log.h5");
  EXPECT_EQ(log.eval_metrics, r.curves.eval_metrics);

  // The folder is the trained heads, bit for bit.
  const auto loaded = MedusaHeads::load(o.out_dir, *target);
  const auto trained = heads.to_heads();
  const auto f = at::randn({128});
  EXPECT_TRUE(at::equal(loaded->logits(f), trained->logits(f)));

  // Stopped halfway and resumed: the same run.
  ParallelHeadTrainingOptions split = o;
  split.out_dir = fresh_dir("medusa_split");
  split.trainer.stop_at = 20;
  MedusaTrainingModel first(*target, 0, c);
  train_parallel_heads(*target, first, split, data);
  split.trainer.stop_at = 0;
  split.resume = true;
  MedusaTrainingModel second(*target, 0, c);
  const auto resumed = train_parallel_heads(*target, second, split, data);
  EXPECT_EQ(resumed.curves.train_loss, r.curves.train_loss);
  EXPECT_EQ(resumed.curves.eval_metrics, r.curves.eval_metrics);

  ParallelHeadTrainingOptions official = split;
  official.loss.recipe = "official";  // another recipe's state
  MedusaTrainingModel fourth(*target, 0, c);
  EXPECT_THROW(train_parallel_heads(*target, fourth, official, data), Error);

  MedusaConfig other = c;
  other.own_lm_head = true;  // another run's state
  MedusaTrainingModel third(*target, 0, other);
  EXPECT_THROW(train_parallel_heads(*target, third, split, data), Error);
  split.resume = false;
  split.context = 3;  // head 2 would have no label
  EXPECT_THROW(train_parallel_heads(*target, second, split, data), Error);
}

// --recipe official: the settings of the official launch scripts (Medusa-1: scripts/train_vicuna_7b.sh with
// train_legacy.py and Hugging Face's defaults; Hydra++: the Hydra README's command with hydra/train/train.py).
TEST(ParallelHeadRecipe, OfficialIsTheOfficialTrainersSettings) {
  TrainerOptions t;
  t.steps = 1234;
  ParallelHeadLossOptions loss;
  apply_official_parallel_recipe(medusa_official_recipe(), t, loss);
  EXPECT_EQ(loss.recipe, "official");
  EXPECT_EQ(loss.decay, 1.0);  // loss += loss_i
  EXPECT_EQ(loss.target, ParallelHeadTarget::Tokens);
  EXPECT_EQ(t.lr, 1e-3);
  EXPECT_EQ(t.weight_decay, 0.0);
  EXPECT_EQ(t.warmup, 124);  // warmup_ratio 0.1, rounded up as Hugging Face does
  EXPECT_EQ(t.min_lr_ratio, 0.0);
  EXPECT_EQ(t.beta2, 0.999);
  EXPECT_EQ(t.grad_clip, 1.0);
  EXPECT_FALSE(t.clip_by_value);

  TrainerOptions h;
  ParallelHeadLossOptions hydra;
  apply_official_parallel_recipe(hydra_official_recipe(), h, hydra);
  EXPECT_EQ(hydra.decay, 1.0);
  EXPECT_EQ(hydra.target, ParallelHeadTarget::TargetDistribution);  // --lm_loss_weight 0 --teacher_loss_weight 1
  EXPECT_EQ(h.lr, 5e-4);
  EXPECT_EQ(h.weight_decay, 0.1);
  EXPECT_EQ(h.warmup, 100);
  EXPECT_EQ(h.min_lr_ratio, 0.33);
  EXPECT_EQ(h.beta2, 0.999);
  EXPECT_EQ(h.grad_clip, 1.0);

  // Flags the user gave keep their values; the rest follow the recipe.
  TrainerOptions mine;
  mine.lr = 2e-4;
  mine.grad_clip = 0.3;
  ParallelHeadLossOptions my_loss;
  my_loss.target = ParallelHeadTarget::TargetDistribution;  // --teacher
  apply_official_parallel_recipe(medusa_official_recipe(), mine, my_loss,
                                 [](const std::string& flag) { return flag == "lr" || flag == "teacher"; });
  EXPECT_EQ(mine.lr, 2e-4);
  EXPECT_EQ(my_loss.target, ParallelHeadTarget::TargetDistribution);
  EXPECT_EQ(mine.grad_clip, 1.0);
  EXPECT_EQ(my_loss.decay, 1.0);
}

}  // namespace
}  // namespace draftlab
