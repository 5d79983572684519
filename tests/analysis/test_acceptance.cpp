// n-alpha, per-position acceptance and the run's headline numbers against hand-computed cases.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/acceptance.h"
#include "analysis/run_metrics.h"
#include "run_builder.h"

using namespace draftlab;
using namespace draftlab::analysis;
using draftlab::testing::chain;
using draftlab::testing::CycleSpec;
using draftlab::testing::make_run;
using draftlab::testing::make_vanilla;

TEST(NAlpha, ChainByHand) {
  // Three cycles accepting 2, 0 and 4 nodes of 4.
  //   depth 1: tested in all 3, accepted in 2        -> 0-alpha = 2/3
  //   depth 2: tested where >= 1 accepted (2 cycles), accepted where >= 2 (2) -> 1-alpha = 1
  //   depth 3: tested where >= 2 (2), accepted where >= 3 (1)                  -> 2-alpha = 1/2
  //   depth 4: tested where >= 3 (1), accepted where 4 (1)                     -> 3-alpha = 1
  //   depth 5: none                                                           -> 4-alpha undefined
  const RunRecord run = make_run("chain", "eagle-chain", "mt_bench", 0.0, {{1, 0, 1.0, {chain(2), chain(0), chain(4)}}});
  const std::vector<AlphaCount> a = n_alpha(run, 4);
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0].tested, 3);
  EXPECT_EQ(a[0].accepted, 2);
  EXPECT_NEAR(a[0].alpha(), 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(a[1].alpha(), 1.0, 1e-12);
  EXPECT_EQ(a[2].tested, 2);
  EXPECT_NEAR(a[2].alpha(), 0.5, 1e-12);
  EXPECT_EQ(a[3].tested, 1);
  EXPECT_NEAR(a[3].alpha(), 1.0, 1e-12);
  EXPECT_EQ(a[4].tested, 0);
  EXPECT_TRUE(std::isnan(a[4].alpha()));
}

TEST(NAlpha, TreeCountsMostProbableChildrenOnlyBothWays) {
  // Root children: rank 0 rejected, rank 1 accepted; under the rank-1 node its rank-0 child is accepted.
  // 0-alpha sees only the rank-0 root child (0/1); 1-alpha the rank-0 child of an accepted parent (1/1).
  const RunRecord run = make_run("tree", "eagle2", "mt_bench", 0.0,
                                 {{1, 0, 1.0, {{{1, 1, 0, 0, 0.6f, 0}, {1, 2, 0, 1, 0.3f, 1}, {2, 3, 1, 0, 0.5f, 0},
                                                {2, 4, 2, 0, 0.9f, 1}}}}});
  const std::vector<AlphaCount> a = n_alpha(run, 1);
  EXPECT_EQ(a[0].tested, 1);
  EXPECT_EQ(a[0].accepted, 0);
  EXPECT_EQ(a[1].tested, 1);  // node 3's parent was rejected: not tested
  EXPECT_EQ(a[1].accepted, 1);
  // Cumulative: the rank-0 chain only, nodes 1 and 3, whatever their parents did; node 4 is off it (its parent has
  // rank 1) although accepted. 0/1 at depth 1, 0/1 at depth 2.
  const std::vector<AlphaCount> c = cumulative_n_alpha(run, 1);
  EXPECT_EQ(c[0].tested, 1);
  EXPECT_EQ(c[0].accepted, 0);
  EXPECT_EQ(c[1].tested, 1);
  EXPECT_EQ(c[1].accepted, 0);
}

TEST(CumulativeNAlpha, ChainByHand) {
  // The chains above (2, 0 and 4 of 4 accepted): depth n + 1 drafted in all 3 cycles, all n + 1 accepted in
  //   depth 1: 2 (2/3), depth 2: 2 (2/3), depth 3: 1 (1/3), depth 4: 1 (1/3); depth 5 never drafted.
  // And for a chain it is the running product of the conditional n-alphas: 2/3, 2/3 * 1, 2/3 * 1 * 1/2, ...
  const RunRecord run = make_run("chain", "eagle-chain", "mt_bench", 0.0, {{1, 0, 1.0, {chain(2), chain(0), chain(4)}}});
  const std::vector<AlphaCount> c = cumulative_n_alpha(run, 4);
  const std::vector<AlphaCount> a = n_alpha(run, 4);
  const std::vector<int64_t> accepted{2, 2, 1, 1};
  double product = 1;
  for (int n = 0; n < 4; ++n) {
    EXPECT_EQ(c[n].tested, 3) << n;
    EXPECT_EQ(c[n].accepted, accepted[n]) << n;
    product *= a[n].alpha();
    EXPECT_NEAR(c[n].alpha(), product, 1e-12) << n;
  }
  EXPECT_TRUE(std::isnan(c[4].alpha()));
}

TEST(PositionAcceptance, PerQuestionByHand) {
  // P1, P2 under the root, P3 under P1.
  //   q0 cycle a: P1 acc, P2 rej, P3 acc;  cycle b: P1 rej, P2 acc, P3 rej  -> 1/2, 1/2, 1/2
  //   q1 cycle  : P1 acc, P2 rej, P3 rej                                   -> 1, 0, 0
  //   q2 cycle  : P1 rej, P2 rej (P3 not drafted)                          -> 0, 0, NaN
  auto tree = [](int p1, int p2, int p3) {
    return CycleSpec{{1, 1, 0, 0, 0.7f, p1}, {1, 2, 0, 1, 0.2f, p2}, {2, 3, 1, 0, 0.5f, p3}};
  };
  const RunRecord run = make_run("static-tree", "static-tree", "mt_bench", 0.0,
                                 {{1, 0, 1.0, {tree(1, 0, 1), tree(0, 1, 0)}},
                                  {2, 0, 1.0, {tree(1, 0, 0)}},
                                  {3, 0, 1.0, {{{1, 1, 0, 0, 0.7f, 0}, {1, 2, 0, 1, 0.2f, 0}}}}});
  const PositionAcceptance pa = position_acceptance(run);
  ASSERT_EQ(pa.positions, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(pa.depths, (std::vector<int32_t>{1, 1, 2}));
  ASSERT_EQ(pa.rate.rows(), 3);
  EXPECT_DOUBLE_EQ(pa.rate(0, 0), 0.5);
  EXPECT_DOUBLE_EQ(pa.rate(0, 1), 0.5);
  EXPECT_DOUBLE_EQ(pa.rate(0, 2), 0.5);
  EXPECT_DOUBLE_EQ(pa.rate(1, 0), 1.0);
  EXPECT_DOUBLE_EQ(pa.rate(1, 2), 0.0);
  EXPECT_DOUBLE_EQ(pa.drafted(0, 0), 2.0);
  EXPECT_DOUBLE_EQ(pa.rate(2, 0), 0.0);
  EXPECT_TRUE(std::isnan(pa.rate(2, 2)));
  EXPECT_DOUBLE_EQ(pa.drafted(2, 2), 0.0);
}

TEST(RunMetrics, TauSpeedupAndIdenticalByHand) {
  ResultsFile results;
  // vanilla: question 1 took 4 s, question 2 took 2 s (question 99 is not in the method run)
  results.runs.push_back(make_vanilla("mt_bench", 0.0, {1, 2, 99}, {4.0, 2.0, 50.0}));
  // the method: q1 cycles accept 2 + 1 and 0 + 1 tokens, q2 one cycle of 1 + 1; 2 s and 1 s; q7 has no vanilla
  // tau = (3 + 1 + 2) / 3 = 2; speedup over the paired questions = (4 + 2) / (2 + 1) = 2
  CycleSpec two{{1, 1, 0, 0, 0.9f, 1}, {2, 2, 1, 0, 0.8f, 1}}, none{{1, 1, 0, 0, 0.4f, 0}},
      one{{1, 1, 0, 0, 0.9f, 1}};
  results.runs.push_back(make_run("eagle2", "eagle2", "mt_bench", 0.0,
                                  {{1, 0, 2.0, {two, none}, 1}, {2, 0, 1.0, {one}, 0}, {7, 0, 9.0, {}, 1}}));
  const RunSummary s = summarize_run(results, results.runs[1]);
  EXPECT_NEAR(s.tau.value, 2.0, 1e-12);
  EXPECT_NEAR(s.speedup.value, 2.0, 1e-12);
  // The point estimates without the bootstrap agree.
  EXPECT_NEAR(tau(results.runs[1]), 2.0, 1e-12);
  EXPECT_NEAR(speedup(results, results.runs[1]), 2.0, 1e-12);
  EXPECT_EQ(s.identical, 2);
  EXPECT_EQ(s.checked, 3);
  // tokens/s over all of the run's questions: (4 + 2 + 0) / (2 + 1 + 9)
  EXPECT_NEAR(s.tokens_per_second, 6.0 / 12.0, 1e-12);
  EXPECT_TRUE(s.tau.has_interval());
  EXPECT_LE(s.tau.low, s.tau.value);
  EXPECT_GE(s.tau.high, s.tau.value);

  const RunSummary v = summarize_run(results, results.runs[0]);
  EXPECT_TRUE(v.is_baseline);
  EXPECT_NEAR(v.tau.value, 1.0, 1e-12);
  EXPECT_NEAR(v.speedup.value, 1.0, 1e-12);
}

TEST(RunMetrics, BaselineMustMatchDatasetTemperatureAndShard) {
  ResultsFile results;
  results.runs.push_back(make_vanilla("mt_bench", 1.0, {1}, {4.0}));  // other temperature
  results.runs.push_back(make_vanilla("gsm8k", 0.0, {1}, {4.0}));     // other dataset
  RunRecord other_shard = make_vanilla("mt_bench", 0.0, {1}, {4.0});
  other_shard.shard = "1/2";
  results.runs.push_back(other_shard);
  results.runs.push_back(make_run("eagle2", "eagle2", "mt_bench", 0.0, {{1, 0, 1.0, {{}}}}));
  EXPECT_EQ(find_baseline(results, results.runs[3]), nullptr);
  EXPECT_TRUE(std::isnan(summarize_run(results, results.runs[3]).speedup.value));
  EXPECT_TRUE(std::isnan(speedup(results, results.runs[3])));
  results.runs[2].shard = "0/1";
  EXPECT_EQ(find_baseline(results, results.runs[3]), &results.runs[2]);
  EXPECT_NEAR(summarize_run(results, results.runs[3]).speedup.value, 4.0, 1e-12);
}
