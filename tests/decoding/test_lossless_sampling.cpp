// T > 0 losslessness: the empirical distribution of the first two generated tokens under each strategy must
// match the target's exact distribution, computed by enumeration with the same processing vanilla decoding
// uses (temperature, top-p). A chi-square statistic is compared with its 1e-6 quantile; the same test run with
// a deliberately wrong acceptance rule must fail it, which shows the bound has power.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/decoding/speculative_decoder.h"
#include "core/model/sampler.h"
#include "chi_square.h"
#include "lossless_fixtures.h"
#include "model/model_fixtures.h"
#include "test_tier.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

// A deliberately wrong acceptance rule: after a rejection, sample from the unmodified p (biased).
at::Tensor keep_p_after_rejection(const at::Tensor& p, int64_t, const at::Tensor&) { return p; }


constexpr int64_t kVocab = 8;
constexpr int kRuns = 3000;
// The fast tier runs the cases on the reference path (libtorch's forward, 15x the native path's time here), over a
// mixture of experts and over int8 dot products with fewer runs, at the same false-alarm level: the acceptance code
// is the dense native path's, which keeps the full count. Its wrong-rule controls run on the native path alone (the
// drafts, hence the rejections, are the same on both paths: 1,831 of them on each for chain_other_draft); the full
// tier runs them on both.
constexpr int kFastAxisRuns = 1000;

struct Exact {
  std::map<std::pair<int64_t, int64_t>, double> p;  // P(first, second)
};

// Enumerates the first two tokens: P(x1, x2) = p(x1 | prompt) * p(x2 | prompt, x1), each from
// Sampler::distribution, i.e. exactly what vanilla decoding samples from.
Exact exact_distribution(const LlamaModel& m, const std::vector<int64_t>& prompt, const SamplingParams& sp) {
  Sampler s(sp);
  KvCache cache = m.make_cache(64);
  auto first = s.distribution(m.forward_chain(cache, prompt).logits[prompt.size() - 1]);
  Exact e;
  for (int64_t x1 = 0; x1 < kVocab; ++x1) {
    const double p1 = first[x1].item<double>();
    if (p1 <= 0) continue;
    KvCache c2 = m.make_cache(64);
    std::vector<int64_t> seq = prompt;
    seq.push_back(x1);
    auto second = s.distribution(m.forward_chain(c2, seq).logits[seq.size() - 1]);
    for (int64_t x2 = 0; x2 < kVocab; ++x2)
      if (second[x2].item<double>() > 0) e.p[{x1, x2}] = p1 * second[x2].item<double>();
  }
  return e;
}

// The two-token outcomes as cells of chi_square.h's test; outcomes the target gives probability 0 count as
// impossible.
ChiSquare chi_square(const Exact& e, const std::map<std::pair<int64_t, int64_t>, int>& counts, int n) {
  std::vector<double> probs;
  std::vector<int64_t> seen;
  for (const auto& [cell, p] : e.p) {
    const auto it = counts.find(cell);
    probs.push_back(p);
    seen.push_back(it == counts.end() ? 0 : it->second);
  }
  for (const auto& [cell, c] : counts)
    if (!e.p.count(cell)) {
      probs.push_back(0);
      seen.push_back(c);
    }
  return draftlab::testing::chi_square(probs, seen, n);
}

class LosslessSampling : public ::testing::TestWithParam<LosslessCase> {
 protected:
  void SetUp() override {
    // A small-vocabulary target (so the two-token outcome space can be enumerated) and a different draft model.
    target = tiny_model_under(GetParam().compute(), 21, kVocab, GetParam().mixture_of_experts);
    std::string dir = temp_dir() + "/draft_" + GetParam().label();
    ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
    tiny_model(at::kFloat, 2, 99, false, kVocab)->save_hf(dir, at::kFloat);
    prompt = prompt_with_a_plausible_lookup(*target);
    target_dir = temp_dir() + "/target_" + GetParam().label();
    ASSERT_EQ(std::system(("mkdir -p '" + target_dir + "'").c_str()), 0);
    target->save_hf(target_dir, at::kFloat);
    draft_dir = dir;
  }

  // rejected (optional): draft nodes the verifier rejected over all runs, the wrong rule's only chance to show;
  // accepted (optional): draft nodes accepted.
  std::map<std::pair<int64_t, int64_t>, int> run(const SamplingParams& sp, RejectionUpdate rule, int runs,
                                                 int64_t* rejected = nullptr, int64_t* accepted = nullptr) {
    // The model paths exist only now: take this label's options with them filled in.
    StrategyConfig cfg;
    for (const auto& c : all_strategy_configs(target_dir, draft_dir))
      if (c.label == GetParam().config.label) cfg = c;
    auto strategy = make_strategy(cfg.name, StrategyContext{*target}, StrategyOptions::parse(cfg.options));
    std::map<std::pair<int64_t, int64_t>, int> counts;
    for (int r = 0; r < runs; ++r) {
      GenerationConfig gen;
      gen.max_new_tokens = 2;
      gen.sampling = sp;
      gen.seed = 1000 + r;
      SpeculativeDecoder decoder(*target, *strategy, rule);
      auto out = decoder.generate(prompt, gen);
      counts[{out.tokens.at(0), out.tokens.at(1)}]++;
      for (const CycleStats& c : out.cycles) {
        if (rejected) *rejected += c.rejected;
        if (accepted) *accepted += c.accepted;
      }
    }
    return counts;
  }

  // A prompt "1 a b c a b": prompt lookup then drafts c. The test only has power against a wrong rule if drafts
  // are sometimes accepted and sometimes rejected, so pick a, b, c where the target gives c a moderate probability.
  static std::vector<int64_t> prompt_with_a_plausible_lookup(const LlamaModel& m) {
    Sampler s(SamplingParams{1.5, 0, 1.0});
    for (int64_t a = 0; a < kVocab; ++a)
      for (int64_t b = 0; b < kVocab; ++b)
        for (int64_t c = 0; c < kVocab; ++c) {
          std::vector<int64_t> p{1, a, b, c, a, b};
          KvCache cache = m.make_cache(16);
          const double pc = s.distribution(m.forward_chain(cache, p).logits[p.size() - 1])[c].item<double>();
          if (pc > 0.3 && pc < 0.7) return p;
        }
    ADD_FAILURE() << "no prompt gives the looked-up token a moderate probability";
    return {1, 3, 5, 2, 3, 5, 2, 3};
  }

  // The first two tokens' empirical distribution against the enumerated one, with and without top-p.
  void expect_target_distribution() {
    const LosslessCase& c = GetParam();
    const bool axis = c.path == CpuPath::Reference || c.mixture_of_experts || c.int8_dot;
    const int runs = axis ? tier_size(kRuns, kFastAxisRuns) : kRuns;
    for (SamplingParams sp : {SamplingParams{1.5, 0, 1.0}, SamplingParams{1.5, 0, 0.8}}) {
      Exact e = exact_distribution(*target, prompt, sp);
      auto counts = run(sp, residual_after_rejection, runs);
      auto chi = chi_square(e, counts, runs);
      const double bound = chi_square_quantile(chi.dof, 1e-6);  // false-alarm rate
      EXPECT_EQ(chi.impossible, 0) << "an outcome of probability 0 occurred";
      EXPECT_LT(chi.statistic, bound) << "top_p " << sp.top_p << " dof " << chi.dof;
    }
  }

  std::vector<int64_t> prompt;
  std::unique_ptr<LlamaModel> target;
  std::string target_dir, draft_dir;
};

TEST_P(LosslessSampling, FirstTwoTokensFollowTheTargetDistribution) { expect_target_distribution(); }

// The same over a mixture-of-experts target. The wrong-rule control (below) is not repeated: it tests the test,
// which the dense target does; over this target it lacks power for eagle_chain_draft_vocab and eagle2_feature_only.
class LosslessSamplingOverMoe : public LosslessSampling {};
TEST_P(LosslessSamplingOverMoe, FirstTwoTokensFollowTheTargetDistribution) { expect_target_distribution(); }

// The wrong-rule control: the same test with a deliberately wrong acceptance rule must fail.
class LosslessSamplingControl : public LosslessSampling {};
TEST_P(LosslessSamplingControl, AWrongAcceptanceRuleIsCaught) {
  if (find_strategy(GetParam().config.name).shape == DraftShape::None)
    GTEST_SKIP() << "no drafts: no acceptance rule to get wrong";
  const StrategyConfig& config = GetParam().config;
  // Drafts the verifier never rejects (q = p) leave no rule to get wrong: check that none is rejected.
  if (!config.never_rejected.empty()) {
    int64_t rejected = 0, accepted = 0;
    run(SamplingParams{config.control_temperature, 0, 1.0}, residual_after_rejection, kRuns / 10, &rejected, &accepted);
    ASSERT_EQ(rejected, 0) << "declared never rejected (" << config.never_rejected << ")";
    ASSERT_GE(accepted, kRuns / 10) << "drafts nothing: 'never rejected' says nothing";
    GTEST_SKIP() << "never rejected: " << config.never_rejected;
  }
  // A variant in which no control can show a wrong rule says why in its descriptor (TestVariant::no_power); its
  // strategy has another variant with power (test_strategy_registry).
  if (!config.no_power.empty()) GTEST_SKIP() << "no power: " << config.no_power;
  SamplingParams sp{config.control_temperature, 0, 1.0};
  Exact e = exact_distribution(*target, prompt, sp);
  int64_t rejected = 0;
  auto counts = run(sp, keep_p_after_rejection, kRuns, &rejected);
  std::cout << GetParam().label() << ": " << rejected << " draft nodes rejected in " << kRuns << " runs at T "
            << sp.temperature << "\n";
  const int64_t needed = kRuns / 10;
  ASSERT_GE(rejected, needed) << "only " << rejected << " draft nodes rejected in " << kRuns
                              << " runs: no power against a wrong rule (raise TestVariant::control_temperature, "
                                 "or declare why no control can have power in TestVariant::no_power)";
  auto chi = chi_square(e, counts, kRuns);
  EXPECT_TRUE(chi.impossible > 0 || chi.statistic > chi_square_quantile(chi.dof, 1e-6))
      << "sampling from p instead of the residual after a rejection biases towards drafted tokens";
}

// Labels only here; run() fills in the model paths made in SetUp.
INSTANTIATE_TEST_SUITE_P(Strategies, LosslessSampling, ::testing::ValuesIn(on_both_paths(all_strategy_configs("", ""))), case_name);
std::vector<LosslessCase> control_cases() {
  std::vector<LosslessCase> cases = on_both_paths(all_strategy_configs("", ""));
  if (fast_tier())
    cases.erase(std::remove_if(cases.begin(), cases.end(), [](const LosslessCase& c) { return c.path != CpuPath::Native; }),
                cases.end());
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Strategies, LosslessSamplingControl, ::testing::ValuesIn(control_cases()), case_name);
// Every strategy again over a mixture-of-experts target (native path): routing must not break the distribution.
INSTANTIATE_TEST_SUITE_P(MixtureOfExperts, LosslessSamplingOverMoe, ::testing::ValuesIn(on_moe_target(all_strategy_configs("", ""))),
                         case_name);
// And over q8_0 and q4_0 weights met by int8 dot products: activations quantized row by row keep verification's rows
// those of vanilla's steps, so the distribution is the int8 target's own.
class LosslessSamplingOverInt8 : public LosslessSampling {};
TEST_P(LosslessSamplingOverInt8, FirstTwoTokensFollowTheTargetDistribution) { expect_target_distribution(); }
INSTANTIATE_TEST_SUITE_P(Int8DotProducts, LosslessSamplingOverInt8,
                         ::testing::ValuesIn(on_int8_target(all_strategy_configs("", ""))), case_name);
INSTANTIATE_TEST_SUITE_P(Int8DotProductsQ4, LosslessSamplingOverInt8,
                         ::testing::ValuesIn(on_int8_target(all_strategy_configs("", ""), false, WeightStorage::Q4_0)),
                         case_name);

}  // namespace
