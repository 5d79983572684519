// The bounds of `draftlab bounds` against independent truths: Sequoia's dynamic program against every tree
// enumerated by brute force and against closed forms, the speculation profile and the chain formula against hand
// counts, the cost model's interpolation and errors, and the speed bounds on a cost curve whose optimum is known.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <set>

#include "analysis/bounds_report.h"
#include "analysis/cost_model.h"
#include "analysis/oracle_lengths.h"
#include "analysis/speculation_profile.h"
#include "analysis/tree_bounds.h"
#include "core/base/error.h"
#include "run_builder.h"

using namespace draftlab;
using namespace draftlab::analysis;
using draftlab::testing::add_oracle;
using draftlab::testing::chain;
using draftlab::testing::make_run;
using draftlab::testing::make_vanilla;

namespace {

using Path = std::vector<int32_t>;
using Tree = std::set<Path>;

// 1 + sum over nodes of the product of p[rank] along the path.
double tree_value(const Tree& tree, const std::vector<double>& p) {
  double v = 1.0;
  for (const Path& path : tree) {
    double prod = 1.0;
    for (int32_t r : path) prod *= p[r];
    v += prod;
  }
  return v;
}

// Every tree of at most max_nodes nodes, at most max_depth deep, ranks below p.size(), a rank-r child only beside
// ranks 0..r-1: grown one node at a time from the empty tree (a set of sets, so each tree once).
std::set<Tree> all_trees(int ranks, int max_nodes, int max_depth) {
  std::set<Tree> seen{Tree{}};
  std::vector<Tree> frontier{Tree{}};
  while (!frontier.empty()) {
    std::vector<Tree> next;
    for (const Tree& t : frontier) {
      if (static_cast<int>(t.size()) == max_nodes) continue;
      std::vector<Path> parents{Path{}};
      for (const Path& p : t)
        if (static_cast<int>(p.size()) < max_depth) parents.push_back(p);
      for (const Path& parent : parents)
        for (int r = 0; r < ranks; ++r) {
          Path child = parent;
          child.push_back(r);
          if (t.count(child)) continue;
          Path left = parent;
          left.push_back(r - 1);
          if (r > 0 && !t.count(left)) continue;
          Tree grown = t;
          grown.insert(child);
          if (seen.insert(grown).second) next.push_back(grown);
        }
    }
    frontier = std::move(next);
  }
  return seen;
}

bool valid_tree(const std::vector<Path>& paths, int ranks, int max_depth) {
  const std::set<Path> set(paths.begin(), paths.end());
  if (set.size() != paths.size()) return false;
  for (const Path& p : paths) {
    if (p.empty() || static_cast<int>(p.size()) > max_depth || p.back() >= ranks || p.back() < 0) return false;
    Path parent(p.begin(), p.end() - 1);
    if (!parent.empty() && !set.count(parent)) return false;
    Path left = parent;
    left.push_back(p.back() - 1);
    if (p.back() > 0 && !set.count(left)) return false;
  }
  return true;
}

}  // namespace

TEST(OptimalTrees, EqualsBruteForceOverEveryTree) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const int ranks = 3, max_nodes = 6, max_depth = 3;
  const std::set<Tree> trees = all_trees(ranks, max_nodes, max_depth);
  ASSERT_GT(trees.size(), 100u);
  for (int trial = 0; trial < 20; ++trial) {
    // Random, not sorted: rank 1 may beat rank 0, which the rank order must still respect.
    std::vector<double> p{u(rng) * 0.7, u(rng) * 0.5, u(rng) * 0.3};
    const OptimalTrees dp(p, max_nodes, max_depth);
    for (int n = 0; n <= max_nodes; ++n) {
      double best = 0;
      for (const Tree& t : trees)
        if (static_cast<int>(t.size()) <= n) best = std::max(best, tree_value(t, p));
      EXPECT_NEAR(dp.expected_tau(n), best, 1e-12) << "trial " << trial << " n " << n;
      const std::vector<Path> paths = dp.paths(n);
      EXPECT_LE(static_cast<int>(paths.size()), n);
      EXPECT_TRUE(valid_tree(paths, ranks, max_depth)) << "trial " << trial << " n " << n;
      EXPECT_NEAR(tree_value(Tree(paths.begin(), paths.end()), p), dp.expected_tau(n), 1e-12) << trial << " " << n;
      // Parents before children, siblings in rank order: the order data/trees/*.json needs.
      for (size_t i = 1; i < paths.size(); ++i) EXPECT_LE(paths[i - 1].size(), paths[i].size());
    }
  }
}

TEST(OptimalTrees, ClosedFormsChainAndStar) {
  // One rank: the best tree of n nodes is a chain, 1 + p + ... + p^n.
  const OptimalTrees chain_only({0.8}, 10, 10);
  double expect = 1, term = 1;
  for (int n = 1; n <= 10; ++n) {
    term *= 0.8;
    expect += term;
    EXPECT_NEAR(chain_only.expected_tau(n), expect, 1e-12) << n;
  }
  EXPECT_EQ(chain_only.paths(3), (std::vector<Path>{{0}, {0, 0}, {0, 0, 0}}));
  // Depth 1: a star of the first n ranks.
  const OptimalTrees star({0.5, 0.2, 0.1, 0.05}, 4, 1);
  EXPECT_NEAR(star.expected_tau(2), 1.7, 1e-12);
  EXPECT_NEAR(star.expected_tau(4), 1.85, 1e-12);
  // Depth cap 2 with one rank of p = 1: at most 2 accepted, whatever the budget.
  EXPECT_NEAR(OptimalTrees({1.0}, 8, 2).expected_tau(8), 3.0, 1e-12);
  EXPECT_THROW(OptimalTrees({1.5}, 4, 2), Error);
  EXPECT_THROW(OptimalTrees({0.5}, 4, 2).expected_tau(5), Error);
}

TEST(ChainFormula, ByHand) {
  EXPECT_NEAR(chain_formula_tau({0.5, 0.5}), 1.75, 1e-12);
  EXPECT_NEAR(chain_formula_tau({0.5, NAN, 1.0}), 1.5, 1e-12);  // stops at the first position never tested
  EXPECT_NEAR(chain_formula_tau({}), 1.0, 1e-12);
}

namespace {

// Question 0 ("writing"): three cycles, K = 3.
//   c0: chain of 3, first two accepted (accept length 3)
//   c1: chain of 3, none accepted (1)
//   c2: a tree: depth 1 rank 0 rejected, depth 1 rank 1 accepted, its depth-2 child accepted (3)
// Question 1 ("math"): one cycle, one node accepted (2).
RunRecord profile_run() {
  auto chain3 = [](int accepted) {
    draftlab::testing::CycleSpec c;
    for (int d = 1; d <= 3; ++d) c.push_back({d, d, d - 1, 0, 0.5f, d <= accepted ? 1 : 0});
    return c;
  };
  RunRecord run = make_run("eagle2", "eagle2", "mt_bench", 0.0,
                           {{0, 0, 1.0, {chain3(2), chain3(0), {{1, 1, 0, 0, 0.6f, 0}, {1, 2, 0, 1, 0.3f, 1},
                                                                 {2, 3, 2, 0, 0.9f, 1}}}},
                            {1, 0, 1.0, {{{1, 1, 0, 0, 0.9f, 1}}}}});
  run.questions.category = {"writing", "math"};
  return run;
}

}  // namespace

TEST(SpeculationProfile, ByHand) {
  const SpeculationProfile p = speculation_profile(profile_run());
  ASSERT_EQ(p.positions, 3);
  EXPECT_EQ(p.cycles, 4);
  // Position 1: reached and drafted in all 4 cycles, accepted in c0, c2, q1 -> 3/4.
  // Position 2: reached (>= 1 accepted) with a depth-2 node: c0, c2 (q1 drafted only depth 1) -> 2/2.
  // Position 3: reached (>= 2) with a depth-3 node: c0 (c2 is 2 deep) -> 0/1.
  EXPECT_NEAR(p.conditional[0], 0.75, 1e-12);
  EXPECT_NEAR(p.conditional[1], 1.0, 1e-12);
  EXPECT_NEAR(p.conditional[2], 0.0, 1e-12);
  EXPECT_NEAR(p.marginal[0], 0.75, 1e-12);
  EXPECT_NEAR(p.marginal[1], 0.5, 1e-12);
  EXPECT_NEAR(p.marginal[2], 0.0, 1e-12);
  EXPECT_NEAR(p.al_per_step, (3 + 1 + 3 + 2) / 4.0, 1e-12);
  EXPECT_NEAR(p.al_per_request, (7.0 / 3.0 + 2.0) / 2.0, 1e-12);
  EXPECT_NEAR(p.al_from_nodes, 1 + 0.75 + 0.5, 1e-12);
  EXPECT_TRUE(p.consistent);
  EXPECT_NEAR(p.simulated_acc_len, 0.75 + 0.75, 1e-12);
  EXPECT_EQ(p.histogram, (std::vector<int64_t>{0, 1, 1, 2, 0}));
  EXPECT_EQ(p.histogram_by_category.at("writing"), (std::vector<int64_t>{0, 1, 0, 2, 0}));
  EXPECT_EQ(p.histogram_by_category.at("math"), (std::vector<int64_t>{0, 0, 1, 0, 0}));
}

TEST(SpeculationProfile, FlagsAcceptLengthsTheNodesDoNotShow) {
  RunRecord run = profile_run();
  run.cycles.accept_length[1] = 2;  // c1 claims a token although none of its nodes was accepted
  const SpeculationProfile p = speculation_profile(run);
  EXPECT_FALSE(p.consistent);
  EXPECT_NEAR(p.al_per_step - p.al_from_nodes, 0.25, 1e-12);
  run.cycles.accept_length[1] = 0;
  EXPECT_THROW(speculation_profile(run), Error);
}

TEST(SpeculationProfile, JsonHasOneEntryPerRunAndNullForUntested) {
  ResultsFile f;
  f.runs.push_back(profile_run());
  const std::string json = speculation_profile_json(f, "x.h5");
  EXPECT_NE(json.find("\"schema_version\": \"1.0\""), std::string::npos);
  EXPECT_NE(json.find("\"conditional_acceptance\": [\n        0.75,\n        1.0,\n        0.0\n      ]"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"consistent\": true"), std::string::npos);
}

TEST(SpeculationProfile, TablesShowTheHandCountedRun) {
  ResultsFile f;
  f.runs.push_back(profile_run());
  const std::vector<Table> t = speculation_profile_tables(f, 3);
  ASSERT_EQ(t.size(), 4u);
  auto texts = [](const std::vector<Cell>& row) {
    std::vector<std::string> out;
    for (const Cell& c : row) out.push_back(c.text);
    return out;
  };
  EXPECT_EQ(texts(t[0].rows.at(0)),
            (std::vector<std::string>{"mt_bench", "eagle2", "4", "2.25", "2.17", "2.25", "ok", "1.50"}));
  EXPECT_EQ(texts(t[1].rows.at(0)), (std::vector<std::string>{"mt_bench", "eagle2", "0.750", "1.000", "0.000"}));
  EXPECT_EQ(texts(t[2].rows.at(0)), (std::vector<std::string>{"mt_bench", "eagle2", "0.750", "0.500", "0.000"}));
  EXPECT_EQ(t[3].columns.back(), "4+");
  EXPECT_EQ(texts(t[3].rows.at(0)), (std::vector<std::string>{"mt_bench", "eagle2", "25.0", "25.0", "50.0", "0.0"}));
  // Two positions shown: lengths 3 and longer fall in the last column.
  const std::vector<Table> narrow = speculation_profile_tables(f, 2);
  EXPECT_EQ(texts(narrow[3].rows.at(0)), (std::vector<std::string>{"mt_bench", "eagle2", "25.0", "25.0", "50.0"}));
}

TEST(TreeValues, ExpectedTauAndRankAcceptance) {
  RunRecord run = profile_run();
  // Values: chain nodes 0.5, 0.25, 0.125; the tree 0.6, 0.3, 0.27; q1 0.9.
  run.nodes.value = {0.5f, 0.25f, 0.125f, 0.5f, 0.25f, 0.125f, 0.6f, 0.3f, 0.27f, 0.9f};
  EXPECT_NEAR(value_expected_tau(run), (4 + 0.875 * 2 + 1.17 + 0.9) / 4.0, 1e-6);
  run.nodes.value[4] = NAN;
  EXPECT_TRUE(std::isnan(value_expected_tau(run)));
  // Rank 0, tested (parent accepted or the root): c0 d1 d2 d3 (2 accepted), c1 d1 (0; its d2, d3 untested),
  // c2 d1 (0) and the d2 under the accepted rank-1 node (1), q1 d1 (1): 7 tested, 4 accepted. Rank 1: c2's, 1/1.
  const std::vector<AlphaCount> r = rank_acceptance(run, 2);
  EXPECT_EQ(r[0].tested, 7);
  EXPECT_EQ(r[0].accepted, 4);
  EXPECT_EQ(r[1].tested, 1);
  EXPECT_EQ(r[1].accepted, 1);
  EXPECT_EQ(r[2].tested, 0);
}

TEST(CostModel, InterpolatesInRowsAndCachedLength) {
  const CostModel m = parse_cost_model(
      R"({"format": "draftlab-cost/1", "model": "m", "threads": 1, "curves": [
            {"cached": 0,   "results": [{"n": 1, "median_ms": 1.0}, {"n": 4, "median_ms": 2.5}]},
            {"cached": 100, "results": [{"n": 1, "median_ms": 2.0}, {"n": 2, "median_ms": 3.0}]}]})",
      "cost.json");
  EXPECT_NEAR(m.seconds(1, 0), 1e-3, 1e-15);
  EXPECT_NEAR(m.seconds(2, 0), 1.5e-3, 1e-15);   // between n = 1 and 4
  EXPECT_NEAR(m.seconds(6, 0), 3.5e-3, 1e-15);   // the last segment extended
  EXPECT_NEAR(m.seconds(2, 50), 0.5 * 1.5e-3 + 0.5 * 3.0e-3, 1e-15);
  EXPECT_NEAR(m.seconds(1, 500), 2e-3, 1e-15);   // past the last curve: that curve
  EXPECT_NE(m.description.find("model m"), std::string::npos);
}

TEST(CostModel, BadFilesNameTheField) {
  auto message = [](const std::string& text) {
    try {
      parse_cost_model(text, "cost.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("{").find("cost.json: not JSON"), std::string::npos);
  EXPECT_NE(message(R"({"curves": []})").find("cost.json: format: expected \"draftlab-cost/1\""), std::string::npos);
  EXPECT_NE(message(R"({"format": "draftlab-cost/1", "curves": []})").find("curves: expected a non-empty list"),
            std::string::npos);
  EXPECT_NE(message(R"({"format": "draftlab-cost/1", "curves": [{"cached": 0, "results": [{"n": 2, "median_ms": 1}]}]})")
                .find("curves[0].results[0].n: expected 1"),
            std::string::npos);
  EXPECT_NE(message(R"({"format": "draftlab-cost/1", "curves": [{"cached": 0, "results": [{"n": 1, "median_ms": -1}]}]})")
                .find("curves[0].results[0].median_ms: expected a positive number, got -1"),
            std::string::npos);
  EXPECT_NE(message(R"({"format": "draftlab-cost/1", "curves": [{"cached": 5, "results": [{"n": 1, "median_ms": 1}]},
                                                             {"cached": 5, "results": [{"n": 1, "median_ms": 1}]}]})")
                .find("curves[1].cached: expected more than the previous curve's 5"),
            std::string::npos);
}

// A forward of n rows costs 1 ms up to 8 rows, then 1 ms more per row.
CostModel flat_to_eight_rows() {
  return parse_cost_model(
      R"({"format": "draftlab-cost/1", "curves": [{"cached": 0, "results": [
            {"n": 1, "median_ms": 1}, {"n": 8, "median_ms": 1}, {"n": 9, "median_ms": 2}]}]})",
      "cost.json");
}

TEST(RunBounds, SpeedBoundsOnACurveWithAKnownOptimum) {
  // A forward costs 1 ms up to 8 rows, then 1 ms more per row: the ceiling drafts K = 7 (8 tokens for 1 ms, 8x).
  const CostModel cost = flat_to_eight_rows();
  // Chains of 4 accepting everything, drafting free, verify times as the model says: p rank 0 = 1, so Sequoia's
  // best is a chain of 7 (tau 8 for 1 ms); predicted speedup = tokens * 1 ms / (cycles * 1 ms) = tau = 5.
  ResultsFile f;
  f.runs.push_back(make_vanilla("mt_bench", 0.0, {0}, {10.0}, 10));
  f.runs.push_back(make_run("chain", "eagle-chain", "mt_bench", 0.0, {{0, 0, 2.0, {chain(4), chain(4)}}}));
  for (auto& s : f.runs[0].cycles.verify_seconds) s = 1e-3;  // plain decoding as the model says
  for (auto& s : f.runs[1].cycles.verify_seconds) s = 1e-3;
  BoundsOptions o;
  o.cost = &cost;
  o.max_nodes = 16;
  const RunBounds b = run_bounds(f, f.runs[1], o);
  EXPECT_NEAR(b.tau, 5.0, 1e-12);
  EXPECT_NEAR(b.predicted_speedup, 5.0, 1e-12);
  EXPECT_NEAR(b.decode_speedup, 5.0, 1e-12);  // 1 ms per token against 2 ms per 10 tokens
  EXPECT_NEAR(b.free_drafting_speedup, 5.0, 1e-12);  // the builder records no drafting time
  EXPECT_NEAR(b.verify_model_error, 0.0, 1e-12);
  EXPECT_NEAR(b.plain_overhead_seconds, 0.0, 1e-15);
  EXPECT_NEAR(b.cycle_overhead_seconds, 0.0, 1e-15);
  EXPECT_EQ(b.ceiling_nodes, 7);
  EXPECT_NEAR(b.ceiling_speedup, 8.0, 1e-12);
  EXPECT_EQ(b.best_nodes, 7);
  EXPECT_NEAR(b.sequoia_speedup, 8.0, 1e-12);
  EXPECT_NEAR(b.measured_speedup, 10.0 / 2.0, 1e-12);
  // The tree file for that best tree is one static-tree can load: the chain of 7.
  const std::string tree = sequoia_tree_json(f.runs[1], b, o);
  EXPECT_NE(tree.find("\"paths\":[[0],[0,0],[0,0,0],[0,0,0,0],[0,0,0,0,0],[0,0,0,0,0,0],[0,0,0,0,0,0,0]]"),
            std::string::npos)
      << tree;
  // Plain decoding's cycles recorded at 11 ms against c(1) = 1 ms: a plain step costs 10 ms more than the model's
  // forward, and the chain's cycles 2 ms more (recorded 3 ms against c(5) = 1 ms, the only drafting run so its own
  // median). Ceiling: (K + 1) * 11 / (c(K + 1) + 2), c = 1 up to 8 rows then + 1 per row: K = 7 gives 88 / 3, K = 16
  // 17 * 11 / 12: the first wins. Predicted: 10 tokens * 11 ms / (2 cycles * 3 ms) = 18.33.
  for (auto& s : f.runs[0].cycles.verify_seconds) s = 11e-3;
  for (auto& s : f.runs[1].cycles.verify_seconds) s = 3e-3;
  const RunBounds loaded = run_bounds(f, f.runs[1], o);
  EXPECT_NEAR(loaded.plain_overhead_seconds, 10e-3, 1e-12);
  EXPECT_NEAR(loaded.cycle_overhead_seconds, 2e-3, 1e-12);
  EXPECT_EQ(loaded.ceiling_nodes, 7);
  EXPECT_NEAR(loaded.ceiling_speedup, 88.0 / 3.0, 1e-9);
  EXPECT_NEAR(loaded.predicted_speedup, 110.0 / 6.0, 1e-9);
  EXPECT_NEAR(loaded.verify_model_error, 0.0, 1e-9);  // the run's own excess is the median of one
  EXPECT_NEAR(loaded.decode_speedup, 110.0 / 6.0, 1e-9);
  // Half the chain's cycle time drafting: decode speedup halves, the drafting-free one stays.
  for (auto& s : f.runs[1].cycles.draft_seconds) s = 3e-3;
  const RunBounds drafting = run_bounds(f, f.runs[1], o);
  EXPECT_NEAR(drafting.decode_speedup, 110.0 / 12.0, 1e-9);
  EXPECT_NEAR(drafting.free_drafting_speedup, 110.0 / 6.0, 1e-9);
  for (auto& s : f.runs[1].cycles.draft_seconds) s = 0.0;
  for (auto& s : f.runs[0].cycles.verify_seconds) s = 1e-3;
  for (auto& s : f.runs[1].cycles.verify_seconds) s = 1e-3;
  // A drafter whose tokens are never accepted: no tree pays, the bound is not drafting (1.00x, n* = 0).
  f.runs[1] = make_run("chain", "eagle-chain", "mt_bench", 0.0, {{0, 0, 2.0, {chain(0), chain(0)}}});
  for (auto& s : f.runs[1].cycles.verify_seconds) s = 1e-3;
  const RunBounds none = run_bounds(f, f.runs[1], o);
  EXPECT_EQ(none.best_nodes, 0);
  EXPECT_NEAR(none.sequoia_speedup, 1.0, 1e-12);
  EXPECT_THROW(sequoia_tree_json(f.runs[1], none, o), Error);  // no tree file static-tree could not load
}

// Oracle draft lengths by hand. Run A's positions match {2, 0, 1, 3, 0, 0, 1, 0}: the walk starts at 0 (m = 2,
// accept length 3), goes on at 3 (m = 3, 4 tokens), then at 7 (m = 0, 1 token): 8 tokens in 3 cycles. Run B's
// {5, 0, 0, 0, 0, 0, 0, 0} alone walks 0 -> 6 -> 7; the best of both per position is {5, 0, 1, 3, 0, 0, 1, 0}:
// 0 (m = 5) -> 6 (m = 1) -> 8, 8 tokens in 2 cycles.
TEST(OracleLengths, WalkAndBestOfProposersByHand) {
  RunRecord a = make_run("pld", "pld", "mt_bench", 0.0, {{0, 0, 1.0, {chain(2), chain(3), chain(0)}}});
  RunRecord b = make_run("chain", "chain", "mt_bench", 0.0, {{0, 0, 1.0, {chain(4), chain(0), chain(0)}}});
  add_oracle(a, 0, {2, 0, 1, 3, 0, 0, 1, 0});
  add_oracle(b, 0, {5, 0, 0, 0, 0, 0, 0, 0});
  const OracleWalk wa = oracle_walk(a, oracle_matched(a));
  EXPECT_EQ(wa.positions, 8);
  EXPECT_EQ(wa.accept_lengths, (std::vector<int32_t>{3, 4, 1}));
  EXPECT_EQ(wa.cached, (std::vector<int64_t>{10, 13, 17}));  // the builder's prompts are 10 tokens
  EXPECT_NEAR(wa.tau(), 8.0 / 3.0, 1e-12);
  EXPECT_NEAR(wa.mean_matched, 7.0 / 8.0, 1e-12);
  EXPECT_NEAR(wa.drafting_share, 0.5, 1e-12);
  EXPECT_EQ(oracle_walk(b, oracle_matched(b)).accept_lengths, (std::vector<int32_t>{6, 1, 1}));
  const auto best = best_of_matched({&a, &b});
  EXPECT_EQ(best[0], (std::vector<int32_t>{5, 0, 1, 3, 0, 0, 1, 0}));
  const OracleWalk wb = oracle_walk(a, best);
  EXPECT_EQ(wb.accept_lengths, (std::vector<int32_t>{6, 2}));
  EXPECT_NEAR(wb.tau(), 4.0, 1e-12);
  // Runs that decoded other text cannot be combined position by position.
  RunRecord shorter = b;
  shorter.oracle.question.pop_back(), shorter.oracle.position.pop_back(), shorter.oracle.matched.pop_back(),
      shorter.oracle.drafted.pop_back();
  EXPECT_THROW(best_of_matched({&a, &shorter}), Error);
  RunRecord other = b;
  other.questions.prompt_tokens[0] = 11;
  EXPECT_THROW(best_of_matched({&a, &other}), Error);
  // A run without oracle rows: nothing to walk.
  const RunRecord none = make_run("pld", "pld", "mt_bench", 0.0, {{0, 0, 1.0, {chain(2)}}});
  EXPECT_EQ(oracle_walk(none, oracle_matched(none)).positions, 0);
  EXPECT_TRUE(std::isnan(oracle_walk(none, oracle_matched(none)).tau()));
}

// The oracle-K bound on the cost curve of RunBounds.SpeedBoundsOnACurveWithAKnownOptimum (1 ms up to 8 rows),
// drafting free and no loop overhead: run A's walk emits 8 tokens (8 ms of plain steps) in cycles of 3, 4 and 1
// rows, the last a plain step: 3 ms, 8/3 x. With the draft recorded at 1 ms per cycle of 4 nodes (a = 0, b =
// 0.25 ms per node), the cycles drafting 2 and 3 tokens add 1.25 ms: 8 / 4.25.
TEST(OracleLengths, OracleKBoundAndTheReportTable) {
  const CostModel cost = flat_to_eight_rows();
  ResultsFile f;
  f.runs.push_back(make_vanilla("mt_bench", 0.0, {0}, {10.0}, 10));
  f.runs.push_back(make_run("pld", "pld", "mt_bench", 0.0, {{0, 0, 1.0, {chain(2), chain(3), chain(0)}}}));
  f.runs.push_back(make_run("chain", "chain", "mt_bench", 0.0, {{0, 0, 1.0, {chain(4), chain(0), chain(0)}}}));
  add_oracle(f.runs[1], 0, {2, 0, 1, 3, 0, 0, 1, 0});
  add_oracle(f.runs[2], 0, {5, 0, 0, 0, 0, 0, 0, 0});
  for (auto& run : f.runs)
    for (auto& s : run.cycles.verify_seconds) s = 1e-3;
  BoundsOptions o;
  o.cost = &cost;
  o.max_nodes = 16;
  const RunBounds b = run_bounds(f, f.runs[1], o);
  EXPECT_EQ(b.oracle_positions, 8);
  EXPECT_NEAR(b.oracle_tau, 8.0 / 3.0, 1e-12);
  EXPECT_NEAR(b.oracle_speedup, 8.0 / 3.0, 1e-12);
  for (auto& s : f.runs[1].cycles.draft_seconds) s = 1e-3;
  EXPECT_NEAR(run_bounds(f, f.runs[1], o).oracle_speedup, 8.0 / 4.25, 1e-12);
  EXPECT_TRUE(std::isnan(run_bounds(f, f.runs[0], o).oracle_tau));  // the baseline has no oracle rows
  // The report: one row per oracle run, then the best of both per step (8 tokens in 2 cycles of 6 and 2 rows,
  // drafting free: 8 ms / 2 ms).
  const std::string text = render_text(bounds_report(f, "f.h5", o));
  EXPECT_NE(text.find("Oracle draft length, temperature = 0"), std::string::npos) << text;
  EXPECT_NE(text.find("best of 2 per step"), std::string::npos) << text;
  EXPECT_NE(text.find("4.00x (drafting free)"), std::string::npos) << text;
  // Without oracle rows there is no such table.
  f.runs[1].oracle = OracleRows{};
  f.runs[2].oracle = OracleRows{};
  EXPECT_EQ(render_text(bounds_report(f, "f.h5", o)).find("Oracle draft length"), std::string::npos);
}
