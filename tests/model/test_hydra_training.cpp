// Hydra head training: the training model's logits at window position i are the inference heads' logits at the
// feature f_i and the window's tokens w_{i+1} .. w_{i+k+1} (teacher forcing and drafting compute the same head), and
// a short run on ts-tiny, with the data's tokens and with Hydra++'s teacher loss, lowers the validation loss and
// writes a folder HydraHeads::load reads back bit for bit.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <iostream>

#include "core/decoding/vanilla_decoder.h"
#include "strategies/hydra/hydra_heads.h"
#include "strategies/hydra/hydra_training.h"
#include "core/training/training_log.h"
#include "model_fixtures.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using testing::fresh_dir;

TEST(HydraTraining, TrainingLogitsAreTheDraftingHeadsOnTheWindowsTokens) {
  auto target = testing::tiny_model();
  HydraConfig c;
  c.num_heads = 3;
  c.num_layers = 2;
  HydraTrainingModel model(*target, 4, c);
  // Move the weights off their zero start so every term matters.
  {
    at::NoGradGuard no_grad;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(8);
    for (auto& [name, t] : model.parameters()) t.add_(at::randn(t.sizes(), gen) * 0.1);
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  const at::Tensor windows = at::randint(0, 97, {2, 9}, gen, at::kLong);
  const at::Tensor features = at::randn({2, 9, 64}, gen);
  const auto logits = model.logits(windows, features);
  ASSERT_EQ(logits.size(), 3u);
  const auto heads = model.to_heads();
  for (int64_t k = 0; k < 3; ++k) {
    ASSERT_EQ(logits[k].sizes().vec(), (std::vector<int64_t>{2, 8 - k - 1, 97}));
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < 8 - k - 1; ++i) {
        std::vector<int64_t> path;
        for (int64_t j = 1; j <= k + 1; ++j) path.push_back(windows[b][i + j].item<int64_t>());
        const at::Tensor want = heads->logits(features[b][i], k, path)[0];
        ASSERT_TRUE(at::allclose(logits[k][b][i].detach(), want, 1e-4, 1e-4)) << "head " << k << " b " << b << " i " << i;
      }
  }
}

TEST(HydraTraining, AShortRunOnTsTinyLowersTheLossWithTokensAndWithTheTeacher) {
  const std::string model_dir = testing::source_path("data/models/ts-tiny");
  ASSERT_TRUE(testing::exists(model_dir + "/model.safetensors"));
  const auto target = LlamaModel::load(model_dir, ComputeOptions{});
  const TextDataset data = testing::target_generated_dataset(*target);
  for (ParallelHeadTarget labels : {ParallelHeadTarget::Tokens, ParallelHeadTarget::TargetDistribution}) {
    const bool teacher = labels == ParallelHeadTarget::TargetDistribution;
    SCOPED_TRACE(teacher ? "teacher" : "tokens");
    ParallelHeadTrainingOptions o = testing::short_parallel_head_run(fresh_dir(teacher ? "hydra_teacher_run" : "hydra_run"));
    o.loss.target = labels;
    HydraConfig c;
    c.num_heads = 3;
    HydraTrainingModel heads(*target, 0, c);
    const auto r = train_parallel_heads(*target, heads, o, data);
    ASSERT_EQ(r.curves.eval_loss.size(), 2u);
    std::cout << (teacher ? "teacher" : "tokens") << ": validation loss " << r.curves.eval_loss.front() << " -> "
              << r.curves.eval_loss.back() << ", head 1 top-1 " << r.curves.metric("head_accuracy")->front()[1] << " -> "
              << r.curves.metric("head_accuracy")->back()[1] << "\n";
    EXPECT_LT(r.curves.eval_loss.back(), 0.9 * r.curves.eval_loss.front());
    EXPECT_GT(r.curves.metric("head_accuracy")->back()[1], r.curves.metric("head_accuracy")->front()[1]);
    EXPECT_EQ(read_training_log(o.out_dir + "/training_log.h5").eval_metrics, r.curves.eval_metrics);
    const auto loaded = HydraHeads::load(o.out_dir, *target);
    const auto f = at::randn({128});
    EXPECT_TRUE(at::equal(loaded->logits(f, 2, {3, 4, 5}), heads.to_heads()->logits(f, 2, {3, 4, 5})));
  }
}

}  // namespace
}  // namespace draftlab
