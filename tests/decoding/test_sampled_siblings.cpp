// Siblings sampled without replacement (EAGLE-1's tree at T > 0). The tree's bookkeeping against hand-worked
// conditional distributions; the verifier's output against the target's exact distribution (chi-square, many
// runs, several sampling settings); and the control: the same draws verified as if they were independent (every
// sibling divided by the unconditional q) is caught by the same test, so the test has power against that mistake.
#include <gtest/gtest.h>

#include <random>

#include "chi_square.h"
#include "core/decoding/draft_tree.h"
#include "core/decoding/verifier.h"
#include "core/model/sampler.h"
#include "model/model_fixtures.h"
#include "test_errors.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

at::Tensor probs(const std::vector<float>& v) { return at::tensor(v, at::kFloat); }

TEST(SampledSiblings, ConditionalDistributionRemovesEarlierSiblings) {
  DraftTree tree;
  const int32_t q = tree.add_distribution(probs({0.5f, 0.3f, 0.2f, 0.0f}));
  const int32_t a = tree.add(0, -1, 0.5f, q, true);
  const int32_t point = tree.add(3, -1);  // a deterministic sibling between them does not count
  const int32_t b = tree.add(1, -1, 0.3f, q, true);
  const int32_t c = tree.add(2, -1, 0.2f, q, true);
  EXPECT_FALSE(tree.draft_distribution(point).defined());
  EXPECT_TRUE(tree.draft_distribution(a).allclose(probs({0.5f, 0.3f, 0.2f, 0.0f})));
  EXPECT_TRUE(tree.draft_distribution(b).allclose(probs({0.0f, 0.6f, 0.4f, 0.0f})));
  EXPECT_TRUE(tree.draft_distribution(c).allclose(probs({0.0f, 0.0f, 1.0f, 0.0f})));
  // Independent draws from the same q see it unchanged.
  const int32_t child = tree.add(2, a, 0.2f, q, false);
  EXPECT_TRUE(tree.draft_distribution(child).allclose(probs({0.5f, 0.3f, 0.2f, 0.0f})));

  // Kept with its earlier siblings, a node keeps its conditional; without them, subtree() refuses.
  const DraftTree kept = tree.subtree({a, b, c});
  EXPECT_TRUE(kept.draft_distribution(2).allclose(probs({0.0f, 0.0f, 1.0f, 0.0f})));
  expect_error([&] { tree.subtree({b, c}); }, {"drawn without replacement after node 0"});
}

TEST(SampledSiblings, ImpossibleDrawsAreRefused) {
  DraftTree tree;
  const int32_t q = tree.add_distribution(probs({0.5f, 0.5f, 0.0f}));
  tree.add(0, -1, 0.5f, q, true);
  expect_error([&] { tree.add(0, -1, 0.5f, q, true); }, {"token 0", "cannot be drawn without replacement"});
  expect_error([&] { tree.add(2, -1, 0.0f, q, true); }, {"token 2", "no mass"});
  expect_error([&] { tree.add(7, -1, 0.0f, q, true); }, {"token 7", "out of range"});
  expect_error([&] { tree.add(1, -1, 1.0f, -1, true); }, {"needs the distribution"});
  EXPECT_EQ(tree.size(), 1);  // a refused node is not left behind
  tree.add(1, -1, 0.5f, q, true);
  EXPECT_EQ(tree.size(), 2);
  // Independent draws too: a token q gives no mass cannot have been drawn from q; repeating one is fine.
  expect_error([&] { tree.add(2, -1, 0.0f, q); }, {"token 2", "cannot be drawn from distribution", "no mass"});
  expect_error([&] { tree.add(9, 0, 0.0f, q); }, {"token 9", "out of range"});
  tree.add(0, 0, 0.5f, q);
  tree.add(0, 0, 0.5f, q);
  EXPECT_EQ(tree.size(), 4);
}

TEST(SampledSiblings, SampleWithoutReplacementGivesDistinctTokensWithMass) {
  Sampler s(SamplingParams{1.0, 0, 1.0}, 5);
  for (int r = 0; r < 200; ++r) {
    auto t = s.sample_without_replacement(probs({0.1f, 0.0f, 0.6f, 0.3f}), 5);
    ASSERT_EQ(t.size(), 3u);  // only three tokens have mass
    std::sort(t.begin(), t.end());
    EXPECT_EQ(t, (std::vector<int64_t>{0, 2, 3}));
  }
}

// The verifier's first token over many runs: the root's children are k draws without replacement from a draft
// distribution q unlike the target's p, verified by multi-round speculative sampling.
class SampledSiblingsVerifier : public ::testing::Test {
 protected:
  static constexpr int64_t kVocab = 16;
  static constexpr int kRuns = 20000;

  void SetUp() override {
    target = tiny_model(at::kFloat, 2, 31, false, kVocab);
    // A fixed draft distribution: peaked on tokens the target finds less likely, so that drafts are often rejected
    // and the residuals matter.
    std::mt19937 rng(3);
    std::vector<float> w(kVocab);
    for (auto& x : w) x = std::pow(static_cast<float>(rng() % 1000 + 1) / 1000.0f, 3.0f);
    q = probs(w);
    q = q / q.sum();
  }

  // counts of the first output token; without_replacement=false verifies the same draws as if independent.
  std::vector<int64_t> run(const SamplingParams& sp, int64_t k, bool without_replacement, at::Tensor* p_out) {
    std::vector<int64_t> counts(kVocab, 0);
    for (int r = 0; r < kRuns; ++r) {
      KvCache cache = target->make_cache(32);
      target->forward_chain(cache, {kPrefix.begin(), kPrefix.end() - 1});
      if (r == 0) {
        KvCache c2 = target->make_cache(32);
        *p_out = Sampler(sp).distribution(target->forward_chain(c2, kPrefix).logits[kPrefix.size() - 1]);
      }
      Sampler drafter(sp, 100000 + r), sampler(sp, r);
      DraftTree tree;
      const int32_t qi = tree.add_distribution(q);
      for (int64_t token : drafter.sample_without_replacement(q, k))
        tree.add(token, -1, q[token].item<float>(), qi, without_replacement);
      Verifier verifier(*target, sampler);
      counts[verifier.verify(cache, kPrefix.back(), tree).tokens.at(0)]++;
    }
    return counts;
  }

  std::vector<double> as_vector(const at::Tensor& p) {
    std::vector<double> v(kVocab);
    for (int64_t i = 0; i < kVocab; ++i) v[i] = p[i].item<double>();
    return v;
  }

  const std::vector<int64_t> kPrefix{1, 5, 9, 2, 7};
  std::unique_ptr<LlamaModel> target;
  at::Tensor q;
};

TEST_F(SampledSiblingsVerifier, OutputFollowsTheTargetDistribution) {
  // Plain, top-k, top-p, both in either order: q keeps mass where p has none, which must never be output.
  for (SamplingParams sp : {SamplingParams{1.0, 0, 1.0}, SamplingParams{2.5, 0, 1.0}, SamplingParams{0.7, 5, 1.0},
                            SamplingParams{1.3, 0, 0.8},
                            SamplingParams{1.0, 6, 0.9, false}, SamplingParams{1.0, 6, 0.9, true}}) {
    for (int64_t k : {2, 5}) {
      at::Tensor p;
      const auto counts = run(sp, k, true, &p);
      const ChiSquare chi = chi_square(as_vector(p), counts, kRuns);
      const double bound = chi_square_quantile(chi.dof, 1e-6);
      std::cout << "T " << sp.temperature << " top_k " << sp.top_k << " top_p " << sp.top_p << " top_p_first "
                << sp.top_p_first << " k " << k << ": chi-square " << chi.statistic << " (dof " << chi.dof
                << ", bound " << bound << ")\n";
      EXPECT_EQ(chi.impossible, 0) << "a token the target gives probability 0 was output";
      EXPECT_LT(chi.statistic, bound) << "T " << sp.temperature << " top_k " << sp.top_k << " k " << k;
    }
  }
}

TEST_F(SampledSiblingsVerifier, DividingByTheUnconditionalQIsCaught) {
  at::Tensor p;
  const SamplingParams sp{1.0, 0, 1.0};
  const auto counts = run(sp, 5, false, &p);
  const ChiSquare chi = chi_square(as_vector(p), counts, kRuns);
  std::cout << "unconditional q: chi-square " << chi.statistic << " (dof " << chi.dof << ")\n";
  EXPECT_GT(chi.statistic, chi_square_quantile(chi.dof, 1e-6))
      << "verifying draws without replacement as independent draws biases the output; the test must see it";
}

}  // namespace
