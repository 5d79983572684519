// total_tokens=auto's arithmetic against hand-computed cases, and the measured curve's basic sanity.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "core/base/error.h"
#include "core/decoding/draft_tree.h"
#include "core/decoding/verify_cost.h"
#include "strategies/chain_budget.h"
#include "strategies/eagle_tree/auto_budget.h"
#include "model/model_fixtures.h"

using namespace draftlab;

TEST(VerifyCost, InterpolatesAndExtrapolatesLinearly) {
  VerifyCost c({{1, 1.0}, {2, 1.0}, {4, 2.0}});
  EXPECT_DOUBLE_EQ(c.seconds(1), 1.0);
  EXPECT_DOUBLE_EQ(c.seconds(3), 1.5);
  EXPECT_DOUBLE_EQ(c.seconds(6), 3.0);  // slope 0.5 per token past the last point
}

TEST(VerifyCost, BestBudgetHandComputed) {
  // Cost 1 + 0.1 n, no draft time, alpha 1. Tokens per second for m nodes: (1 + sum v) / (1 + 0.1 (m + 1)).
  //   m=0: 1/1.1 = 0.909;  m=1 (v .9): 1.9/1.2 = 1.583;  m=2 (+.5): 2.4/1.3 = 1.846;  m=3 (+.1): 2.5/1.4 = 1.786.
  VerifyCost c({{1, 1.1}, {2, 1.2}, {4, 1.4}, {8, 1.8}});
  EXPECT_EQ(best_budget({0.9f, 0.5f, 0.1f}, 1.0, 0.0, c), 2);
  // A flat cost curve takes everything; a steep one nothing.
  EXPECT_EQ(best_budget({0.9f, 0.5f, 0.1f}, 1.0, 0.0, VerifyCost({{1, 1.0}, {8, 1.0}})), 3);
  EXPECT_EQ(best_budget({0.05f, 0.01f}, 1.0, 0.0, VerifyCost({{1, 1.0}, {2, 2.0}})), 0);
  // Miscalibration: alpha 0.2 shrinks m=2's gain: (1 + .28) / 1.3 = 0.985 < m=1's (1.18 / 1.2 = 0.983)? no:
  // m=1 0.983, m=2 0.985, m=3 (1.3/1.4) 0.929 -> 2; alpha 0.1: m=1 1.09/1.2 = .908, m=2 1.14/1.3 = .877, m=0 .909 -> 0.
  EXPECT_EQ(best_budget({0.9f, 0.5f, 0.1f}, 0.2, 0.0, c), 2);
  EXPECT_EQ(best_budget({0.9f, 0.5f, 0.1f}, 0.1, 0.0, c), 0);
}

// Drafting priced per level: a second level costing 0.5 s turns m = 2 of a chain (depths 1, 2) into 2.4 / (1.3 + 0.5)
// = 1.333 < m = 1's 1.583; the same values as two siblings (depths 1, 1) need no second level: m = 2 (1.846).
TEST(VerifyCost, BestBudgetPricesEachLevelDrafted) {
  VerifyCost c({{1, 1.1}, {2, 1.2}, {4, 1.4}, {8, 1.8}});
  double rate = 0.0;
  EXPECT_EQ(best_budget({0.9f, 0.5f}, 1.0, 0.0, c, &rate, {1, 2}, 0.5), 1);
  EXPECT_NEAR(rate, 1.9 / 1.2, 1e-6);
  EXPECT_EQ(best_budget({0.9f, 0.5f}, 1.0, 0.0, c, &rate, {1, 1}, 0.5), 2);
  EXPECT_NEAR(rate, 2.4 / 1.3, 1e-6);
  EXPECT_EQ(best_budget({0.9f, 0.5f}, 1.0, 0.0, c, &rate, {1, 2}, 0.0), 2);
  EXPECT_THROW(best_budget({0.9f, 0.5f}, 1.0, 0.0, c, &rate, {1}, 0.5), Error);
}

TEST(VerifyCost, DraftingPaysCountsTheDraftAgainstPlainDecoding) {
  // Cost 1 + 0.1 n, values .9 .5 .1, alpha 1. Plain decoding: 1 / c(1) = 0.909 tokens per second.
  // Free drafting: m = 2 gives 1.846 (BestBudgetHandComputed): pays.
  // Drafting costs 2 s: m = 0 .. 3 give 1/3.1 = .323, 1.9/3.2 = .594, 2.4/3.3 = .727, 2.5/3.4 = .735: once the
  // draft is paid for, verifying all 3 is best (.735 > .323), but it loses to not drafting (.735 < .909).
  VerifyCost c({{1, 1.1}, {2, 1.2}, {4, 1.4}, {8, 1.8}});
  auto pays = [&](const std::vector<float>& values, double draft_seconds) {
    double rate = 0.0;
    const int32_t m = best_budget(values, 1.0, draft_seconds, c, &rate);
    return drafting_pays(m, rate, c);
  };
  double rate = 0.0;
  EXPECT_EQ(best_budget({0.9f, 0.5f, 0.1f}, 1.0, 0.0, c, &rate), 2);
  EXPECT_NEAR(rate, 2.4 / 1.3, 1e-6);  // the values are floats
  EXPECT_TRUE(pays({0.9f, 0.5f, 0.1f}, 0.0));
  EXPECT_EQ(best_budget({0.9f, 0.5f, 0.1f}, 1.0, 2.0, c, &rate), 3);
  EXPECT_NEAR(rate, 2.5 / 3.4, 1e-6);
  EXPECT_FALSE(pays({0.9f, 0.5f, 0.1f}, 2.0));
  // At d = 0.3 m = 2 gives 2.4 / 1.6 = 1.5 > .909, pays; a draft of nothing never does.
  EXPECT_TRUE(pays({0.9f, 0.5f, 0.1f}, 0.3));
  EXPECT_FALSE(pays({}, 0.0));
}

TEST(AutoBudget, VerifiesAPaidDraftButStopsDraftingWhenDraftingLoses) {
  VerifyCost c({{1, 1.1}, {2, 1.2}, {4, 1.4}, {8, 1.8}});
  DraftTree tree;
  for (float confidence : {0.9f, 0.5f, 0.1f}) tree.add(7, -1, confidence);
  for (double draft_seconds : {2.0, 0.0}) {
    AutoBudget budget(draft_seconds);  // drafting's cost per cycle fixed (auto_cost)
    ASSERT_TRUE(budget.drafts_this_cycle());
    EXPECT_EQ(budget.choose(tree, {0, 1, 2}, c, 0.01).size(), draft_seconds > 0 ? 3u : 2u) << draft_seconds;
    budget.observe({0}, -1, 0.0);
    // 2 s of drafting: the next cycle drafts nothing (a probe comes every 8th); free drafting goes on.
    EXPECT_EQ(budget.drafts_this_cycle(), draft_seconds == 0.0) << draft_seconds;
  }
}

// Calibration per class (confidence bin, first or later sibling): a target that accepts the head's first choice and
// its child and never the second sibling turns the tree from the two root children (values .9, .6) to the first one
// and its child (.45), at the same size. One factor for every node (accepted / predicted = 1 / 1.5) would keep the
// order, and the sibling.
TEST(AutoBudget, CalibratesEachConfidenceBinAndSiblingRank) {
  // Up to three rows cost about the same; a fourth triples the cost: at most two nodes a cycle.
  VerifyCost c({{1, 1.0}, {2, 1.1}, {3, 1.2}, {4, 3.0}});
  DraftTree tree;
  tree.add(7, -1, 0.9f);  // 0: depth 1, rank 0
  tree.add(8, -1, 0.6f);  // 1: depth 1, rank 1
  tree.add(9, 0, 0.5f);   // 2: depth 2, rank 0, value .45
  AutoBudget budget(0.0);
  ASSERT_TRUE(budget.drafts_this_cycle());
  EXPECT_EQ(budget.choose(tree, {0, 1, 2}, c, 0.0), (std::vector<int32_t>{0, 1}));
  budget.observe({0}, 9, 0.0);  // the first root child accepted, its sibling not; the target's next token: node 2's
  for (int cycle = 0; cycle < 20; ++cycle) {
    ASSERT_TRUE(budget.drafts_this_cycle());
    const std::vector<int32_t> chosen = budget.choose(tree, {0, 1, 2}, c, 0.0);
    ASSERT_EQ(chosen.size(), 2u) << cycle;
    // The target's path is 0 -> 2: in the chosen subtree, node 0, then node 1 when it is node 2.
    if (chosen[1] == 2)
      budget.observe({0, 1}, 5, 0.0);
    else
      budget.observe({0}, 9, 0.0);
    if (cycle == 19) EXPECT_EQ(chosen, (std::vector<int32_t>{0, 2}));
  }
  // Node 2: confidence .5, in the fourth bin (.35, .5]; a first child.
  EXPECT_EQ(AutoBudget::calibration_class(tree.node(2)), 2 * 3);
  EXPECT_EQ(AutoBudget::calibration_class(tree.node(1)), 2 * 4 + 1);
  // A node given without its parent: Error, not a node read as a child of the root.
  EXPECT_THROW(budget.choose(tree, {1, 2}, c, 0.0), Error);
}

// At T = 0 the target's tokens say which unverified nodes would have been accepted: a child of the path left out of
// the tree is a trial too (its class learns although the budget never verified it); at T > 0 it is not.
TEST(AutoBudget, AtTZeroUnverifiedChildrenOfThePathAreTrialsToo) {
  VerifyCost c({{1, 1.0}, {2, 1.1}, {3, 1.2}, {4, 3.0}});
  DraftTree tree;
  tree.add(7, -1, 0.9f);  // 0
  tree.add(8, -1, 0.6f);  // 1
  tree.add(9, 0, 0.3f);   // 2: value .27, left out
  for (bool greedy : {true, false}) {
    AutoBudget budget(0.0);
    ASSERT_TRUE(budget.drafts_this_cycle());
    ASSERT_EQ(budget.choose(tree, {0, 1, 2}, c, 0.0, greedy), (std::vector<int32_t>{0, 1}));
    budget.observe({0}, 9, 0.0);  // node 0 accepted, and the target's next token is node 2's
    // Node 2's class (.2, .35]: prior two trials at .275; one success at .3: (1 + .55) / (.3 + .55).
    EXPECT_NEAR(budget.conditional_acceptance(tree.node(2)), greedy ? 0.3 * 1.55 / 0.85 : 0.3, 1e-6) << greedy;
  }
}

// A clock budget tests move by hand (or leave still).
DraftSkipping::Clock::time_point skipping_now_value;
DraftSkipping::Clock::time_point skipping_now() { return skipping_now_value; }

// A probe after skipped cycles first takes in what the head missed: its drafting time is no measure of drafting's.
// Measured drafting (no auto_cost): chains .9 / .9, accepted, drafted in .05 s pay (2.7 tokens in .05 + c(3) = 1.35
// against plain decoding's 1 in 1.1). One draft worth nothing (.01, m = 0) starts skipping; the probe, 60 s of it
// catching up, pays at the drafting time known before it. Learned as drafting time, those 60 s stopped drafting
// again on the next cycle (2.7 tokens in about 3 + 1.3 s).
TEST(AutoBudget, AProbeCatchingUpIsNoMeasureOfDraftingTime) {
  VerifyCost c({{1, 1.1}, {2, 1.2}, {4, 1.4}, {8, 1.8}});
  DraftTree chain, worthless;
  chain.add(8, chain.add(7, -1, 0.9f), 0.9f);
  worthless.add(7, -1, 0.01f);
  AutoBudget budget;  // measured
  budget.use_clock(&skipping_now);  // a clock that does not move: no measured rates, the cost model alone decides
  const auto cycle = [&](double draft_seconds) {
    EXPECT_EQ(budget.choose(chain, {0, 1}, c, draft_seconds).size(), 2u);
    budget.observe({0, 1}, 9, 0.0);
  };
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(budget.drafts_this_cycle()) << i;
    cycle(0.05);
  }
  ASSERT_TRUE(budget.drafts_this_cycle());
  EXPECT_TRUE(budget.choose(worthless, {0}, c, 0.05).empty());
  budget.observe({}, 5, 0.0);
  int skipped = 0;
  while (!budget.drafts_this_cycle()) ASSERT_LT(++skipped, 300);
  ASSERT_GT(skipped, 0);
  cycle(60.0);  // the probe
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(budget.drafts_this_cycle()) << i;
    cycle(0.05);
  }
}

// The expansion follows the budget: unlimited before the first choice; after choosing a tree, one level below its
// deepest node and one node more than its widest level; the probe's 2 x 2 after skipped cycles (and through the probe
// cycle itself).
TEST(AutoBudget, TheExpansionFollowsTheBudgetItChose) {
  VerifyCost c({{1, 1.1}, {2, 1.2}, {4, 1.4}, {8, 1.8}});
  DraftTree siblings;
  for (float confidence : {0.9f, 0.5f, 0.1f}) siblings.add(7, -1, confidence);
  AutoBudget free_drafts(0.0);
  EXPECT_EQ(free_drafts.expansion_depth(), 0);
  EXPECT_EQ(free_drafts.expansion_width(), 0);
  ASSERT_TRUE(free_drafts.drafts_this_cycle());
  ASSERT_EQ(free_drafts.choose(siblings, {0, 1, 2}, c, 0.0).size(), 2u);  // BestBudgetHandComputed's m = 2
  EXPECT_EQ(free_drafts.expansion_depth(), 2);  // two nodes at depth 1
  EXPECT_EQ(free_drafts.expansion_width(), 3);
  DraftTree chain;
  for (int32_t parent : {-1, 0, 1}) chain.add(7, parent, 0.95f);
  ASSERT_EQ(free_drafts.choose(chain, {0, 1, 2}, c, 0.0).size(), 3u);
  EXPECT_EQ(free_drafts.expansion_depth(), 4);  // one node at each of depths 1-3
  EXPECT_EQ(free_drafts.expansion_width(), 2);
  AutoBudget costly(2.0);
  ASSERT_TRUE(costly.drafts_this_cycle());
  costly.choose(siblings, {0, 1, 2}, c, 0.01);
  costly.observe({0}, -1, 0.0);
  int probes = 0;
  for (int cycle = 0; cycle < 8; ++cycle)
    if (costly.drafts_this_cycle()) {
      ++probes;
      EXPECT_EQ(costly.expansion_depth(), 2) << "a probe expands two levels of two nodes";
      EXPECT_EQ(costly.expansion_width(), 2);
    }
  EXPECT_EQ(probes, 1);
}

TEST(VerifyCost, AnotherTokenMayPayBoundsEveryLongerChain) {
  // Cost 1.1 + 0.1 (n - 1), 0.05 s per drafted token, each further token worth at most the last one.
  VerifyCost c({{1, 1.1}, {2, 1.2}, {4, 1.4}, {8, 1.8}});
  // One token of value .9 drafted (0.05 s): its best prefix gives 1.9 / 1.25 = 1.52; a second token worth up to .9
  // could give 2.8 / 1.4 = 2.0: draft it.
  EXPECT_TRUE(another_token_may_pay({0.9f}, 0.9, 0.05, 0.05, c, 6));
  // Then .9 x .05 = .045: the best prefix is the first token, 1.9 / 1.3 = 1.4615; j more tokens of .045 each give
  // (1.945 + .045 j) / (1.3 + .15 j): 1.290 at j = 1, falling: stop.
  EXPECT_FALSE(another_token_may_pay({0.9f, 0.045f}, 0.045, 0.1, 0.05, c, 6));
  // No room, or a draft too costly for any token: stop; a fresh chain with free drafting: go.
  EXPECT_FALSE(another_token_may_pay({0.9f}, 0.9, 0.05, 0.05, c, 0));
  EXPECT_FALSE(another_token_may_pay({0.9f}, 0.9, 0.05, 5.0, c, 6));
  EXPECT_TRUE(another_token_may_pay({}, 1.0, 0.0, 0.0, c, 1));
  // As an expectation (decay: the drafter's typical confidence per token). Next token expected at .9 x .5 = .45:
  // (1.9 + .45) / (.1 + 1.3) = 1.679 > 1.52: draft it. At .9 x .05 = .045, decaying by .05: 1.945 / 1.4 = 1.389,
  // then 1.947 / 1.55 = 1.256, ...: stop (the bound, next .9 and no decay, goes on: the first case above).
  EXPECT_TRUE(another_token_may_pay({0.9f}, 0.45, 0.05, 0.05, c, 6, 0.5));
  EXPECT_FALSE(another_token_may_pay({0.9f}, 0.045, 0.05, 0.05, c, 6, 0.05));
}

TEST(ChainBudget, StopsDraftingCutsAtTZeroOnlyAndSkipsWhenNothingPays) {
  auto model = draftlab::testing::tiny_model();
  const VerifyCost c({{1, 1.1}, {2, 1.2}, {4, 1.4}, {8, 1.8}});
  for (bool greedy : {true, false}) {
    ChainBudget budget(*model, 8, FixedCosts{c, 0.05});  // fresh: no typical confidence known yet
    ASSERT_TRUE(budget.drafts_this_cycle());
    budget.start(8, 1);
    DraftTree chain;
    chain.add(7, chain.add(5, -1, 0.9f), 0.05f);  // values .9 and .045
    EXPECT_TRUE(budget.another(chain.node(0)));  // as AnotherTokenMayPayBoundsEveryLongerChain
    EXPECT_FALSE(budget.another(chain.node(1)));
    // Two tokens drafted: at T = 0 the best prefix (one token: 1.9 / 1.3 = 1.46 against 1.945 / 1.4 = 1.39); at
    // T > 0 both (the second was drawn before its value was known).
    EXPECT_EQ(budget.finish(chain, greedy), greedy ? 1 : 2);
    EXPECT_EQ(chain.size(), greedy ? 1 : 2);
    budget.observe(1);
    // It has seen a second token at .05 of the first: a next chain's second token is expected at .9 x .05 and is
    // not drawn (the bound drew it, and the cut at T = 0 dropped it).
    ASSERT_TRUE(budget.drafts_this_cycle());
    budget.start(8, 1);
    EXPECT_FALSE(budget.another(0.9f));
  }
  // Drafting at 2 s a token never beats plain decoding (1 / 1.1 per second). The first 8 chains are drafted whatever
  // they cost (the calibration is learning); after the 9th, the next cycles skip drafting, but for a probe every 8th.
  ChainBudget costly(*model, 8, FixedCosts{c, 2.0});
  for (int cycle = 0; cycle < 9; ++cycle) {
    ASSERT_TRUE(costly.drafts_this_cycle()) << cycle;
    costly.start(8, 1);
    DraftTree chain;
    chain.add(5, -1, 0.9f);
    EXPECT_FALSE(costly.another(0.9f));
    EXPECT_EQ(costly.finish(chain, true), 1);  // paid for: verifying it beats verifying nothing
    costly.observe(1);
  }
  int drafted = 0;
  for (int cycle = 0; cycle < 8; ++cycle) drafted += costly.drafts_this_cycle() ? 1 : 0;
  EXPECT_EQ(drafted, 1);
}

// One drafting cycle at T = 0 of a one-token chain of this value, of which the target accepted `accepted`.
void one_token_cycle(ChainBudget& budget, float value, int64_t accepted) {
  budget.start(8, 1);
  DraftTree chain;
  chain.add(5, -1, value);
  budget.another(value);
  budget.finish(chain, true);
  budget.observe(accepted);
}

// Whether the next cycles draft follows the recent cycles' tokens over their time, not the last cycle alone: after
// chains that paid (.9 accepted: 1.9 / 1.25 per second against plain decoding's 1 / 1.1), one chain worth nothing
// (.01, rejected: best 0, 0.87 per second) does not stop drafting; a run of them does.
TEST(ChainBudget, OneUnluckyChainDoesNotStopDrafting) {
  auto model = draftlab::testing::tiny_model();
  const VerifyCost c({{1, 1.1}, {2, 1.2}, {4, 1.4}, {8, 1.8}});
  ChainBudget budget(*model, 8, FixedCosts{c, 0.05});
  const auto cycle = [&](float value, int64_t accepted) { one_token_cycle(budget, value, accepted); };
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(budget.drafts_this_cycle()) << i;
    cycle(0.9f, 1);
  }
  ASSERT_TRUE(budget.drafts_this_cycle());
  cycle(0.01f, 0);
  EXPECT_TRUE(budget.drafts_this_cycle());
  int cycles = 0;
  for (; cycles < 40 && budget.drafts_this_cycle(); ++cycles) cycle(0.01f, 0);
  EXPECT_GT(cycles, 0);
  EXPECT_LT(cycles, 40);
}

// Without the clock (auto_cost: costs given), a probe that pays resumes drafting, but where the resumed drafting
// stops within a few cycles, the probes still back off. Here every probe pays and the third cycle after it does not:
// of 1,000 cycles, 4 in every 11 drafted when each probe set the interval back to 8, about 30 with the back-off.
// Drafting that lasts (16 paying cycles) brings the probes back to every 8th cycle.
TEST(DraftSkipping, ProbesBackOffWhileResumedDraftingDoesNotLast) {
  DraftSkipping skipping;
  skipping.chose(false);  // drafting stopped
  int drafted = 0;
  for (int cycle = 0, resumed = -1; cycle < 1000; ++cycle) {
    if (!skipping.drafts_this_cycle()) continue;
    ++drafted;
    resumed = resumed < 0 ? 0 : resumed + 1;  // 0: the probe
    skipping.chose(resumed < 3);
    if (resumed == 3) resumed = -1;
  }
  EXPECT_LT(drafted, 60);
  for (int cycle = 0; cycle < 16; ++cycle) skipping.chose(true);
  skipping.chose(false);
  int skipped = 0;
  while (!skipping.drafts_this_cycle()) ASSERT_LT(++skipped, 8);
}

// Cycles timed against the clock: a drafting cycle takes `draft_seconds` for `draft_tokens` tokens, a plain one 1 s for
// 1; the cost model's verdict on the k-th drafting cycle of a stretch (k = 0: the first, a probe after a stop) is
// model_pays(k). Returns the share of cycles 100-999 that drafted.
template <typename Verdict>
double drafted_share_when_timed(double draft_seconds, int64_t draft_tokens, Verdict model_pays) {
  DraftSkipping skipping;
  skipping.measure_rates(true);
  skipping.use_clock(&skipping_now);
  skipping.begin();
  int drafted = 0;
  for (int cycle = 0, stretch = 0; cycle < 1000; ++cycle) {
    const bool drafts = skipping.drafts_this_cycle();
    const double seconds = drafts ? draft_seconds : 1.0;
    using Duration = DraftSkipping::Clock::duration;
    skipping_now_value += std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
    if (drafts) {
      skipping.committed(draft_tokens);
      const bool pays = model_pays(stretch);
      skipping.chose(pays);
      stretch = pays ? stretch + 1 : 0;
    } else {
      stretch = 0;
    }
    if (cycle >= 100) drafted += drafts ? 1 : 0;
  }
  return drafted / 900.0;
}

// Where the clock says drafting loses (2 tokens in 3 s against plain decoding's 1 in 1 s), it stops whatever the
// cost model says, and probes come back to it at ever longer intervals: drafting in 7% of cycles where the model
// always says it pays, 12% where each probe pays and the third cycle after it does not (P-EAGLE's pattern on AVX2; 36%
// when a probe that paid set the interval back to 8). Where the clock says it pays (3 in 2 s), drafting goes on but
// for a cycle in 32 that measures plain decoding (97%), and where the model's verdict swings (every fifth cycle says
// no) each stop lasts 7 cycles, as without the clock (43%; 5 of every 12 cycles).
TEST(DraftSkipping, TheClockStopsDraftingThatLosesWhateverTheModelSays) {
  const auto always = [](int) { return true; };
  const auto three = [](int k) { return k < 3; };
  const auto swinging = [](int k) { return k % 5 != 4; };
  EXPECT_LT(drafted_share_when_timed(3.0, 2, always), 0.09);
  EXPECT_LT(drafted_share_when_timed(3.0, 2, three), 0.14);
  EXPECT_GT(drafted_share_when_timed(2.0, 3, always), 0.95);
  EXPECT_GT(drafted_share_when_timed(2.0, 3, swinging), 0.4);
}

// Once stopped, a probe that pays resumes drafting: what was seen before a stretch of skipped cycles weighs less. Here
// drafting costs 0.3 a token: a chain at .9 accepted pays (1.9 / 1.5 against 1 / 1.1 per second), one at .01 rejected
// does not (1 / 1.4). After chains that did not pay and probes that did not either, one probe that pays is enough.
TEST(ChainBudget, OneProbeThatPaysResumesDrafting) {
  auto model = draftlab::testing::tiny_model();
  const VerifyCost c({{1, 1.1}, {2, 1.2}, {4, 1.4}, {8, 1.8}});
  ChainBudget budget(*model, 8, FixedCosts{c, 0.3});
  const auto cycle = [&](float value, int64_t accepted) { one_token_cycle(budget, value, accepted); };
  const auto skip_to_probe = [&] {
    int skipped = 0;
    while (!budget.drafts_this_cycle()) {
      if (++skipped > 300) return false;
    }
    return skipped > 0;
  };
  for (int i = 0; i < 12; ++i) cycle(0.9f, 1);
  int bad = 0;
  for (; bad < 40 && budget.drafts_this_cycle(); ++bad) cycle(0.01f, 0);
  ASSERT_LT(bad, 40) << "drafting never stopped";
  for (int probe = 0; probe < 8; ++probe) {
    ASSERT_TRUE(skip_to_probe()) << probe;
    cycle(0.01f, 0);
  }
  ASSERT_TRUE(skip_to_probe());
  cycle(0.9f, 1);
  EXPECT_TRUE(budget.drafts_this_cycle());
}

// At T > 0 a drawn token's probability under q says little about its acceptance, so each depth is expected at its
// recent acceptance. Here the first two tokens of every chain are accepted and the third never, whatever q gave them
// (values .01-.05): after the first cycle (every depth at the prior, the chain drafted to its room), chains stop at
// two tokens (a third, expected at about .1 / 1.1, cannot pay its .05 and the verify row) and drafting goes on:
// 3 tokens in .1 + 1.3 against plain decoding's 1 in 1.1. Calibrating by the values kept chains at one token.
TEST(ChainBudget, AtTAboveZeroEachDepthIsExpectedAtItsAcceptanceNotAtItsValue) {
  auto model = draftlab::testing::tiny_model();
  const VerifyCost c({{1, 1.1}, {2, 1.2}, {4, 1.4}, {8, 1.8}});
  ChainBudget budget(*model, 8, FixedCosts{c, 0.05});
  for (int cycle = 0; cycle < 20; ++cycle) {
    ASSERT_TRUE(budget.drafts_this_cycle()) << cycle;
    budget.start(8, 1);
    DraftTree chain;
    int32_t parent = -1;
    for (int k = 0; k < 8; ++k) {
      const float q = 0.01f + 0.01f * static_cast<float>((cycle * 3 + k * 7) % 5);  // the drawn token's q
      parent = chain.add(5, parent, q);
      if (!budget.another(chain.node(parent).value, true)) break;
    }
    const int32_t verified = budget.finish(chain, false);
    EXPECT_EQ(verified, chain.size()) << cycle;  // T > 0: never cut
    EXPECT_EQ(verified, cycle == 0 ? 8 : 2) << cycle;
    budget.observe(std::min<int64_t>(2, verified));
  }
}

// A clock the next test moves by hand.
ChainBudget::Clock::time_point fake_now_value;
ChainBudget::Clock::time_point fake_now() { return fake_now_value; }
void advance_fake_clock(double seconds) {
  fake_now_value += std::chrono::duration_cast<ChainBudget::Clock::duration>(std::chrono::duration<double>(seconds));
}

// A draft that starts a sequence or comes back after skipped cycles first takes in what it missed, with its first
// token. Such a cycle is judged at the steady first-token time, not its own: measured drafting (the tiny model's
// verify curve c), a one-token chain at .9, accepted, drafted in c(1) / 10 pays (2 tokens in c(1) / 10 + c(2)); taking
// in a prompt or a skipped stretch first (30 c(1)), it would not, and each new request stopped drafting; and a probe
// that pays but for its catching up never resumed it.
TEST(ChainBudget, ACycleCatchingUpIsJudgedAtTheSteadyDraftTime) {
  auto model = draftlab::testing::tiny_model();
  ChainBudget budget(*model, 8, std::nullopt);
  budget.use_clock(&fake_now);
  const double c1 = VerifyCost::shared(*model, 9, 1).seconds(1);
  const auto cycle = [&](double first_seconds, float value, int64_t accepted) {
    budget.start(8, 1);
    advance_fake_clock(first_seconds);
    DraftTree chain;
    chain.add(5, -1, value);
    budget.another(chain.node(0));
    budget.finish(chain, true);
    budget.observe(accepted);
  };
  budget.begin();
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(budget.drafts_this_cycle()) << i;
    cycle(i == 0 ? 30 * c1 : c1 / 10, 0.9f, 1);
  }
  for (int request = 0; request < 3; ++request) {
    budget.begin();
    ASSERT_TRUE(budget.drafts_this_cycle());
    cycle(30 * c1, 0.9f, 1);
    EXPECT_TRUE(budget.drafts_this_cycle()) << request;
    cycle(c1 / 10, 0.9f, 1);
  }
  // Chains worth nothing (.01, rejected) stop drafting; then a probe that catches up on the skipped stretch and pays.
  int bad = 0;
  for (; bad < 40 && budget.drafts_this_cycle(); ++bad) cycle(c1 / 10, 0.01f, 0);
  ASSERT_LT(bad, 40) << "drafting never stopped";
  int skipped = 0;
  while (!budget.drafts_this_cycle()) ASSERT_LT(++skipped, 300);
  cycle(30 * c1, 0.9f, 1);
  EXPECT_TRUE(budget.drafts_this_cycle());
}

// A parallel drafter's slots (pard, peagle, dflash k=auto) go through the same rule after their one forward: slot 0
// (top probability .9) is kept, slot 1 (.05, value .045) says no further one pays, and T = 0 cuts it (the same numbers
// as above). The next forward then draws one slot beyond the chain verified (reach), the cap before any was.
TEST(ChainBudget, ChainOfSlotsKeepsWhatPaysAndReachesOneBeyondIt) {
  auto model = draftlab::testing::tiny_model();
  const VerifyCost c({{1, 1.1}, {2, 1.2}, {4, 1.4}, {8, 1.8}});
  ChainBudget budget(*model, 8, FixedCosts{c, 0.05});
  const int64_t vocab = 8;
  at::Tensor logits = at::full({4, vocab}, 0.0f);
  for (int64_t slot = 0; slot < 4; ++slot) {
    const double top = slot == 1 ? 0.05 : 0.9;  // the top token's probability
    // top at token `slot + 1`, the rest uniform: logit log(top (V - 1) / (1 - top)) over zeros.
    logits[slot][slot + 1] = std::log(top * (vocab - 1) / (1 - top));
  }
  Sampler greedy{SamplingParams{}};
  EXPECT_EQ(budget.reach(), 8);
  ASSERT_TRUE(budget.drafts_this_cycle());
  budget.start(4, 1);
  const DraftTree chain = chain_of_slots(logits, greedy, &budget);
  ASSERT_EQ(chain.size(), 1);
  EXPECT_EQ(chain.node(0).token, 1);
  EXPECT_NEAR(chain.node(0).value, 0.9f, 1e-5);
  budget.observe(1);
  EXPECT_EQ(budget.reach(), 2);
  // Without a budget every slot is a node (k fixed).
  const DraftTree all = chain_of_slots(logits, greedy, nullptr);
  ASSERT_EQ(all.size(), 4);
  EXPECT_EQ(all.node(3).token, 4);
}

TEST(VerifyCost, CalibrationFollowsObservations) {
  AcceptanceCalibration cal(1.0);
  EXPECT_DOUBLE_EQ(cal.alpha(), 1.0);
  for (int i = 0; i < 99; ++i) cal.observe(2.0, 1.0);
  EXPECT_NEAR(cal.alpha(), (99.0 + 1) / (198.0 + 1), 1e-12);
}

TEST(VerifyCost, MeasuredCurveIsPositiveAndNonDecreasingInN) {
  auto model = draftlab::testing::tiny_model();
  auto c = VerifyCost::measure(*model, 16, 32, 3);
  ASSERT_EQ(c.points().size(), 9u);  // 1, 2, ..., 8, 16
  for (size_t k = 0; k < c.points().size(); ++k) {
    EXPECT_EQ(c.points()[k].first, k < 8 ? static_cast<int64_t>(k) + 1 : 16);
    EXPECT_GT(c.points()[k].second, 0.0) << k;
    if (k > 0) EXPECT_GE(c.points()[k].second, c.points()[k - 1].second) << k;
  }
}

// Pool adjacent violators, by hand: 2.6 > 1.8 pool to 2.2; then 2.2 > 2.0 pools the three to 2.1; 3.3 stands.
TEST(VerifyCost, NonDecreasingPoolsWhatNoiseInverted) {
  const auto out = non_decreasing({{1, 2.6}, {2, 1.8}, {3, 2.0}, {4, 3.3}});
  ASSERT_EQ(out.size(), 4u);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(out[k].second, 6.4 / 3, 1e-12) << k;
  EXPECT_DOUBLE_EQ(out[3].second, 3.3);
  EXPECT_EQ(out[3].first, 4);
  const auto same = non_decreasing({{1, 1.0}, {2, 1.5}});
  EXPECT_DOUBLE_EQ(same[0].second, 1.0);
  EXPECT_DOUBLE_EQ(same[1].second, 1.5);
}
