// EAGLE head training: the batched training forward against EagleHead::forward, overfitting one fixed batch,
// and the saved head folder loading back with EagleHead::load and predicting the same features bitwise.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>

#include "core/base/error.h"
#include "strategies/eagle/eagle_head.h"
#include "strategies/eagle/eagle_head_training.h"
#include "core/training/trainer.h"
#include "model_fixtures.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using testing::fresh_dir;

at::Tensor random_windows(int64_t batch, int64_t length, int64_t vocab, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randint(vocab, {batch, length}, gen, at::TensorOptions().dtype(at::kLong));
}

TEST(HeadTraining, TrainingForwardMatchesTheInferenceHead) {
  auto target = testing::tiny_model();
  HeadTrainingModel model(*target, 3);
  const auto head = model.to_head();
  const int64_t T = 9;
  const auto tokens = random_windows(1, T, 97, 1);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2);
  const auto features = at::randn({1, T, 64}, gen, at::TensorOptions().dtype(at::kFloat));
  at::NoGradGuard no_grad;
  const auto trained = model.forward(tokens, features)[0];
  KvCache cache = head->make_cache(T);
  const auto inference = head->forward(cache, tokens[0], features[0], at::arange(T, at::kLong));
  EXPECT_TRUE(at::allclose(trained, inference, 1e-4, 1e-5)) << (trained - inference).abs().max().item<double>();
}

TEST(HeadTraining, OverfitsOneBatchAndTheSavedHeadLoadsBitwise) {
  auto target = testing::tiny_model();
  HeadTrainingModel model(*target, 5);
  const auto windows = random_windows(4, 17, 97, 11);
  TrainerOptions t;
  t.steps = 300;
  t.lr = 3e-3;
  t.warmup = 20;
  t.weight_decay = 0;
  t.grad_clip = 0.5;
  t.eval_every = 0;
  t.quiet = true;
  Trainer trainer(model.parameters(), t);
  double first = 0, last = 0;
  for (int64_t s = 0; s < t.steps; ++s) {
    const double l = trainer.train_step([&] { return model.loss(windows, s).loss; });
    if (s == 0) first = l;
    last = l;
  }
  EXPECT_LT(last, 0.3 * first) << "start " << first << ", end " << last;
  const auto eval = model.loss(windows, -1);
  EXPECT_GT(eval.correct, eval.count / 2) << eval.correct << " of " << eval.count;

  const std::string dir = fresh_dir("head_training_overfit");
  const auto trained = model.to_head();
  trained->save(dir);
  const auto loaded = EagleHead::load(dir, *target);
  const int64_t T = 12;
  const auto tokens = random_windows(1, T, 97, 4)[0];
  auto gen = at::make_generator<at::CPUGeneratorImpl>(6);
  const auto features = at::randn({T, 64}, gen, at::TensorOptions().dtype(at::kFloat));
  KvCache c1 = trained->make_cache(T), c2 = loaded->make_cache(T);
  const auto positions = at::arange(T, at::kLong);
  const auto a = trained->forward(c1, tokens, features, positions);
  const auto b = loaded->forward(c2, tokens, features, positions);
  EXPECT_TRUE(at::equal(a, b));
}

TEST(HeadTraining, TrainEagleHeadWritesALoadableFolderAndResumes) {
  auto target = testing::tiny_model();
  std::vector<int32_t> train, val;
  for (int i = 0; i < 3000; ++i) train.push_back((i * 5 + i / 7) % 97);
  for (int i = 0; i < 400; ++i) val.push_back((i * 5 + i / 7) % 97);
  const TextDataset data(std::move(train), std::move(val));
  EagleHeadTrainingOptions o;
  o.batch = 2;
  o.context = 16;
  o.eval_windows = 4;
  o.trainer.steps = 6;
  o.trainer.warmup = 2;
  o.trainer.eval_every = 3;
  o.trainer.quiet = true;
  o.out_dir = fresh_dir("head_training_run");
  const auto full = train_eagle_head(*target, o, data);
  ASSERT_NE(full.curves.metric("accuracy"), nullptr);
  ASSERT_EQ(full.curves.eval_loss.size(), full.curves.metric("accuracy")->size());
  EXPECT_NO_THROW(EagleHead::load(o.out_dir, *target));

  EagleHeadTrainingOptions split = o;
  split.out_dir = fresh_dir("head_training_split");
  split.trainer.stop_at = 3;
  train_eagle_head(*target, split, data);
  split.trainer.stop_at = 0;
  split.resume = true;
  const auto resumed = train_eagle_head(*target, split, data);
  ASSERT_FALSE(resumed.curves.train_loss.empty());
  EXPECT_EQ(resumed.curves.train_loss.back(), full.curves.train_loss.back());

  split.context = 8;  // another run's state
  EXPECT_THROW(train_eagle_head(*target, split, data), Error);
}

}  // namespace
}  // namespace draftlab
