// Sampler: the processed distribution against hand-computed cases and a naive reference, and draws against
// their probabilities within a statistical bound.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/base/error.h"
#include "core/model/sampler.h"

#include <ATen/CPUGeneratorImpl.h>

using namespace draftlab;

namespace {

at::Tensor logits_of_probs(const std::vector<float>& p) { return at::tensor(p).log(); }

void expect_probs(const at::Tensor& got, const std::vector<double>& want) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i].item<double>(), want[i], 1e-6) << "token " << i;
}

TEST(Sampler, GreedyIsOneHotAtTheFirstMaximum) {
  Sampler s(SamplingParams{});
  auto logits = at::tensor(std::vector<float>{1, 3, 3, 2});
  expect_probs(s.distribution(logits), {0, 1, 0, 0});
  EXPECT_EQ(s.sample(logits), 1);
}

TEST(Sampler, TemperatureTopKTopPHandComputed) {
  auto logits = logits_of_probs({0.5f, 0.3f, 0.15f, 0.05f});
  expect_probs(Sampler({1.0, 0, 1.0}).distribution(logits), {0.5, 0.3, 0.15, 0.05});
  // top-k 2: renormalise the two largest.
  expect_probs(Sampler({1.0, 2, 1.0}).distribution(logits), {0.625, 0.375, 0, 0});
  // top-p 0.8: 0.5 + 0.3 reaches 0.8 -> those two.
  expect_probs(Sampler({1.0, 0, 0.8}).distribution(logits), {0.625, 0.375, 0, 0});
  // top-p 0.81: needs the third.
  expect_probs(Sampler({1.0, 0, 0.81}).distribution(logits), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0});
  // Temperature 2 on these logits: p_i^(1/2), normalised.
  double z = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.15) + std::sqrt(0.05);
  expect_probs(Sampler({2.0, 0, 1.0}).distribution(logits),
               {std::sqrt(0.5) / z, std::sqrt(0.3) / z, std::sqrt(0.15) / z, std::sqrt(0.05) / z});
}

// The order of top-k and top-p matters when both are set. p = (0.4, 0.3, 0.2, 0.1), k = 2, top_p = 0.5:
// top-k first renormalises to (4/7, 3/7), whose mass before token 1 (4/7) already reaches 0.5 -> token 0 alone;
// top-p first keeps {0, 1} of the full distribution (mass before token 2 is 0.7), then top-k keeps both.
TEST(Sampler, TopKAndTopPOrderHandComputed) {
  const auto logits = logits_of_probs({0.4f, 0.3f, 0.2f, 0.1f});
  expect_probs(Sampler(SamplingParams{1.0, 2, 0.5, false}).distribution(logits), {1, 0, 0, 0});
  expect_probs(Sampler(SamplingParams{1.0, 2, 0.5, true}).distribution(logits), {4.0 / 7, 3.0 / 7, 0, 0});
  // Top-p keeping fewer than k tokens: top-k changes nothing after it.
  expect_probs(Sampler(SamplingParams{1.0, 3, 0.35, true}).distribution(logits), {1, 0, 0, 0});
  // Either order is the same when only one is set.
  expect_probs(Sampler(SamplingParams{1.0, 2, 1.0, true}).distribution(logits), {4.0 / 7, 3.0 / 7, 0, 0});
  EXPECT_TRUE(parse_sampling_order("top_p,top_k"));
  EXPECT_FALSE(parse_sampling_order("top_k,top_p"));
  EXPECT_THROW(parse_sampling_order("top_p"), Error);
}

TEST(Sampler, TopPMatchesANaiveReferenceOnRandomLogits) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  for (int trial = 0; trial < 20; ++trial) {
    auto logits = at::normal(0, 2, {50}, gen);
    const double top_p = 0.1 + 0.04 * trial;
    auto got = Sampler({0.7, 0, top_p}).distribution(logits);
    // Naive: sort probabilities, take tokens while the mass so far is below top_p.
    auto p = at::softmax(logits / 0.7, 0);
    std::vector<std::pair<float, int>> order;
    for (int i = 0; i < 50; ++i) order.push_back({p[i].item<float>(), i});
    std::sort(order.begin(), order.end(), [](auto a, auto b) { return a.first > b.first; });
    std::vector<double> want(50, 0.0);
    double mass = 0, kept = 0;
    for (auto [pi, i] : order) {
      if (mass >= top_p) break;
      want[i] = pi;
      mass += pi;
      kept += pi;
    }
    for (auto& w : want) w /= kept;
    for (int i = 0; i < 50; ++i) EXPECT_NEAR(got[i].item<double>(), want[i], 1e-5) << "trial " << trial;
  }
}

TEST(Sampler, DrawFrequenciesMatchProbabilities) {
  const std::vector<double> p{0.5, 0.3, 0.15, 0.05};
  Sampler s({1.0, 0, 1.0}, 42);
  const int N = 200000;
  std::vector<int> counts(4, 0);
  auto logits = logits_of_probs({0.5f, 0.3f, 0.15f, 0.05f});
  auto dist = s.distribution(logits);
  for (int i = 0; i < N; ++i) counts[s.sample_from(dist)]++;
  for (int i = 0; i < 4; ++i) {
    const double sd = std::sqrt(N * p[i] * (1 - p[i]));
    EXPECT_LT(std::abs(counts[i] - N * p[i]), 5 * sd) << "token " << i;  // 5 sigma: false alarm ~1e-6
  }
}

TEST(Sampler, SeedsRepeatAndDiffer) {
  auto logits = at::zeros({1000});
  auto draws = [&](uint64_t seed) {
    Sampler s({1.0, 0, 1.0}, seed);
    std::vector<int64_t> v;
    for (int i = 0; i < 20; ++i) v.push_back(s.sample(logits));
    return v;
  };
  EXPECT_EQ(draws(1), draws(1));
  EXPECT_NE(draws(1), draws(2));
}

TEST(Sampler, BadParametersAreErrors) {
  EXPECT_THROW(Sampler({1.0, 0, 0.0}), Error);
  EXPECT_THROW(Sampler({1.0, 0, 1.5}), Error);
  EXPECT_THROW(Sampler({1.0, -1, 1.0}), Error);
  EXPECT_THROW(Sampler({-1.0, 0, 1.0}), Error);
}

}  // namespace
