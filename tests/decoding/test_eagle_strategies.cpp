// EAGLE strategies: EAGLE-2's reranking and expansion bookkeeping on hand-built trees, the static tree's shape
// and file validation, the drafter's cache sync and tree attention against plain head chains, and a quick
// end-to-end check that every EAGLE strategy decodes exactly like vanilla on a tiny model. (The full
// losslessness suites over peer models are tests/decoding/test_lossless_*.cpp.)
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "core/base/error.h"
#include "core/decoding/speculative_decoder.h"
#include "core/decoding/vanilla_decoder.h"
#include "core/model/forward_clock.h"
#include "model/model_fixtures.h"
#include "strategies/eagle/eagle_head.h"
#include "strategies/eagle_tree/eagle2.h"
#include "strategies/eagle_tree/eagle_drafter.h"
#include "strategies/registry.h"
#include "strategies/eagle_tree/static_tree.h"
#include "test_paths.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Every kept node's parent is kept: what makes a subset a tree.
bool closed_under_parent(const DraftTree& tree, const std::vector<int32_t>& keep) {
  std::set<int32_t> kept(keep.begin(), keep.end());
  for (int32_t i : keep)
    if (tree.node(i).parent >= 0 && !kept.count(tree.node(i).parent)) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// EAGLE-2 bookkeeping on a hand-built tree. Confidences on the edges, values (products from the root) in brackets:
//
//   root -> a 0.6 [0.6]  -> d 0.5 [0.3]  -> h 0.5 [0.15]
//                        -> e 0.4 [0.24]
//        -> b 0.3 [0.3]  -> f 0.9 [0.27] -> i 1.0 [0.27]
//                        -> g 0.1 [0.03]
//        -> c 0.1 [0.1]
//
// By value, ties to the shallower node: a .6, b .3 (depth 1), d .3 (depth 2), f .27, i .27 (deeper), e .24,
// h .15, c .1, g .03.
struct HandTree {
  DraftTree tree;
  int32_t a, b, c, d, e, f, g, h, i;
  HandTree() {
    a = tree.add(10, -1, 0.6f);
    b = tree.add(11, -1, 0.3f);
    c = tree.add(12, -1, 0.1f);
    d = tree.add(13, a, 0.5f);
    e = tree.add(14, a, 0.4f);
    f = tree.add(15, b, 0.9f);
    g = tree.add(16, b, 0.1f);
    h = tree.add(17, d, 0.5f);
    i = tree.add(18, f, 1.0f);
  }
};

TEST(Eagle2Rerank, HandBuiltTreeKeepsTheBestByValue) {
  HandTree t;
  ASSERT_FLOAT_EQ(t.tree.node(t.b).value, t.tree.node(t.d).value);  // the tie the rule must break
  ASSERT_FLOAT_EQ(t.tree.node(t.f).value, t.tree.node(t.i).value);
  auto sorted = [](std::vector<int32_t> v) { std::sort(v.begin(), v.end()); return v; };
  EXPECT_EQ(eagle2_rerank(t.tree, 2), sorted({t.a, t.b}));  // b before d: same value, shallower
  EXPECT_EQ(eagle2_rerank(t.tree, 3), sorted({t.a, t.b, t.d}));
  EXPECT_EQ(eagle2_rerank(t.tree, 4), sorted({t.a, t.b, t.d, t.f}));  // f before i: same value, shallower
  EXPECT_EQ(eagle2_rerank(t.tree, 5), sorted({t.a, t.b, t.d, t.f, t.i}));
  EXPECT_EQ(eagle2_rerank(t.tree, 6), sorted({t.a, t.b, t.d, t.f, t.i, t.e}));
  EXPECT_EQ(eagle2_rerank(t.tree, 100).size(), 9u);
  EXPECT_TRUE(eagle2_rerank(t.tree, 0).empty());

  // The kept nodes form a tree: c (value .1) is dropped while deeper, higher-value nodes stay.
  DraftTree kept = t.tree.subtree(eagle2_rerank(t.tree, 5));
  ASSERT_EQ(kept.size(), 5);
  std::vector<int64_t> tokens;
  for (const auto& n : kept.nodes()) tokens.push_back(n.token);
  EXPECT_EQ(tokens, (std::vector<int64_t>{10, 11, 13, 15, 18}));  // a b d f i, flat order preserved
  EXPECT_EQ(kept.node(2).parent, 0);                             // d under a
  EXPECT_EQ(kept.node(3).parent, 1);                             // f under b
  EXPECT_EQ(kept.node(4).parent, 3);                             // i under f
  EXPECT_FLOAT_EQ(kept.node(4).value, 0.3f * 0.9f);

  // Restricted to a subset (the no-rerank draft cut to a budget).
  EXPECT_EQ(eagle2_rerank(t.tree, 2, {t.c, t.b, t.g}), sorted({t.b, t.c}));
}

TEST(Eagle2Rerank, KeptSetIsAlwaysConnected) {
  // Random trees with ties (confidences from a small set, including 1) at every budget.
  std::mt19937 rng(7);
  const float confs[] = {1.0f, 0.5f, 0.25f, 0.5f, 0.125f, 1.0f, 0.75f};
  for (int trial = 0; trial < 50; ++trial) {
    DraftTree tree;
    const int n = 5 + static_cast<int>(rng() % 60);
    for (int k = 0; k < n; ++k) {
      const int32_t parent = tree.size() == 0 ? -1 : static_cast<int32_t>(rng() % (tree.size() + 1)) - 1;
      tree.add(k, parent, confs[rng() % 7]);
    }
    for (int32_t count = 0; count <= n; ++count) {
      auto keep = eagle2_rerank(tree, count);
      ASSERT_EQ(static_cast<int32_t>(keep.size()), count);
      ASSERT_TRUE(closed_under_parent(tree, keep)) << "trial " << trial << " count " << count;
      EXPECT_NO_THROW(tree.subtree(keep));
    }
  }
}

TEST(Eagle2Select, ByValueOrByConfidence) {
  HandTree t;
  const std::vector<int32_t> layer2{t.d, t.e, t.f, t.g};
  // Values d .3, e .24, f .27, g .03; confidences d .5, e .4, f .9, g .1.
  EXPECT_EQ(eagle2_select(t.tree, layer2, 2, true), (std::vector<int32_t>{t.d, t.f}));
  EXPECT_EQ(eagle2_select(t.tree, layer2, 2, false), (std::vector<int32_t>{t.f, t.d}));
  EXPECT_EQ(eagle2_select(t.tree, layer2, 10, true), (std::vector<int32_t>{t.d, t.f, t.e, t.g}));
  EXPECT_TRUE(eagle2_select(t.tree, layer2, 0, true).empty());
}

// ---------------------------------------------------------------------------------------------------------------
// Tree files.

TEST(TreeSpec, Eagle1TreeLoads) {
  TreeSpec spec = load_tree_spec(resolve_tree_path("mc_sim_7b_63"));
  EXPECT_EQ(spec.name, "mc_sim_7b_63");
  EXPECT_EQ(spec.size(), 25);
  EXPECT_EQ(spec.max_depth(), 5);
  EXPECT_EQ(resolve_tree_path("chain5"), std::string(DRAFTLAB_SOURCE_DIR) + "/data/trees/chain5.json");
  EXPECT_EQ(load_tree_spec(resolve_tree_path("data/trees/chain5.json")).size(), 5);
  EXPECT_NE(error_of([] { resolve_tree_path("no_such_tree"); }).find("no_such_tree"), std::string::npos);
}

TEST(TreeSpec, BadFilesNameFileAndPath) {
  auto msg = [](const std::string& text) { return error_of([&] { parse_tree_spec(text, "trees/bad.json"); }); };
  auto expect_mentions = [](const std::string& m, std::initializer_list<const char*> parts) {
    for (const char* p : parts) EXPECT_NE(m.find(p), std::string::npos) << m << "\n  (should mention " << p << ")";
  };
  expect_mentions(msg("{\"paths\": [[0], [-1]]}"), {"trees/bad.json", "paths[1]", ">= 0"});
  expect_mentions(msg("{\"paths\": [[0], [0, 0], [1, 0]]}"), {"trees/bad.json", "paths[2]", "[1]"});
  expect_mentions(msg("{\"paths\": [[0], [0, 1, 0], [0, 2]]}"), {"paths[1]", "[0, 1]"});  // order-independent
  expect_mentions(msg("{\"paths\": [[0], [0]]}"), {"paths[1]", "twice"});
  expect_mentions(msg("{\"paths\": [[0], []]}"), {"paths[1]"});
  expect_mentions(msg("{\"paths\": [[0], [0.5]]}"), {"paths[1]"});
  expect_mentions(msg("{\"paths\": [[0], 3]}"), {"paths[1]"});
  expect_mentions(msg("{\"paths\": []}"), {"trees/bad.json", "paths"});
  expect_mentions(msg("{\"tree\": [[0]]}"), {"trees/bad.json", "paths"});
  expect_mentions(msg("{\"paths\": [[0]"), {"trees/bad.json", "JSON"});
  // Order in the file does not matter; siblings are sorted by rank.
  TreeSpec spec = parse_tree_spec("{\"paths\": [[1, 0], [1], [0]]}", "x.json");
  EXPECT_EQ(spec.paths, (std::vector<std::vector<int32_t>>{{0}, {1}, {1, 0}}));
  EXPECT_EQ(spec.parent, (std::vector<int32_t>{-1, -1, 1}));
}

// ---------------------------------------------------------------------------------------------------------------
// Strategies on a tiny target with random heads.

class EagleStrategies : public ::testing::Test {
 protected:
  std::unique_ptr<LlamaModel> target = tiny_model();
  std::vector<int64_t> prompt{1, 5, 9, 26, 53, 58, 12, 93};
  Sampler greedy{SamplingParams{}, 0};

  // Prefill as the decoder does; returns the first token and leaves the prompt's features in `features`.
  int64_t prefill(at::Tensor& features) {
    KvCache cache = target->make_cache(64);
    auto out = target->forward_chain(cache, prompt);
    features = out.features;
    return out.logits[prompt.size() - 1].argmax().item<int64_t>();
  }

  std::unique_ptr<DraftStrategy> started(const std::string& name, const std::vector<std::string>& options) {
    auto s = make_strategy(name, StrategyContext{*target}, StrategyOptions::parse(options));
    at::Tensor features;
    const int64_t first = prefill(features);
    s->begin(prompt, features, first);
    sequence = prompt;
    sequence.push_back(first);
    return s;
  }

  DraftTree propose(DraftStrategy& s, int32_t max_nodes = 1000, int32_t tokens_wanted = 1000, Sampler* sampler = nullptr) {
    DraftRequest request{sequence, max_nodes, tokens_wanted, sampler ? *sampler : greedy};
    return propose_one(s, request);
  }

  std::vector<int64_t> sequence;
};

void expect_valid_tree(const DraftTree& tree, const std::string& what) {
  for (int32_t i = 0; i < tree.size(); ++i) {
    const DraftNode& n = tree.node(i);
    EXPECT_LT(n.parent, i) << what;
    EXPECT_EQ(n.distribution, -1) << what << ": tree drafts are deterministic";
    EXPECT_GT(n.confidence, 0.0f) << what;
    EXPECT_LE(n.confidence, 1.0f) << what;
  }
  // Siblings: distinct tokens, most confident first.
  std::vector<std::vector<int32_t>> groups{tree.children_of_root()};
  for (int32_t i = 0; i < tree.size(); ++i) groups.push_back(tree.children(i));
  for (const auto& g : groups) {
    std::set<int64_t> tokens;
    for (size_t k = 0; k < g.size(); ++k) {
      EXPECT_TRUE(tokens.insert(tree.node(g[k]).token).second) << what << ": duplicate sibling token";
      if (k) EXPECT_GE(tree.node(g[k - 1]).confidence, tree.node(g[k]).confidence) << what;
    }
  }
}

TEST_F(EagleStrategies, StaticTreeHasEagle1Shape) {
  auto s = started("static-tree", {});
  DraftTree tree = propose(*s);
  ASSERT_EQ(tree.size(), 25);
  TreeSpec spec = load_tree_spec(resolve_tree_path("mc_sim_7b_63"));
  std::map<int32_t, int> per_depth;
  for (int32_t i = 0; i < tree.size(); ++i) {
    EXPECT_EQ(tree.node(i).parent, spec.parent[i]) << "node " << i;
    EXPECT_EQ(tree.node(i).depth, static_cast<int32_t>(spec.paths[i].size())) << "node " << i;
    EXPECT_EQ(tree.node(i).sibling_rank, spec.paths[i].back()) << "node " << i;
    ++per_depth[tree.node(i).depth];
  }
  EXPECT_EQ(per_depth, (std::map<int32_t, int>{{1, 4}, {2, 8}, {3, 8}, {4, 3}, {5, 2}}));
  expect_valid_tree(tree, "static-tree");

  // The child of rank r is the head's r-th most probable token: check depth 1 and node [1, 1] independently.
  auto head = std::shared_ptr<const EagleHead>(EagleHead::random(*target, 0));
  EagleDrafter drafter(head);
  at::Tensor features;
  prefill(features);
  drafter.begin(prompt, features, sequence.back());
  DraftRequest request{sequence, 1000, 1000, greedy};
  drafter.start_tree(request);
  DraftTree mine;
  auto root = top_candidates(drafter.expand(mine, {EagleDrafter::kRoot}), 4)[0];
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(tree.node(r).token, root.tokens[r]) << "rank " << r;
    EXPECT_FLOAT_EQ(tree.node(r).confidence, root.probs[r]);
    mine.add(root.tokens[r], -1, root.probs[r]);
  }
  auto below_1 = top_candidates(drafter.expand(mine, {1}), 2)[0];
  const int32_t node_1_1 = 8;  // [1, 1] in sorted order: [0] [1] [2] [3] [0,0] [0,1] [0,2] [1,0] [1,1]
  ASSERT_EQ(spec.paths[node_1_1], (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(tree.node(node_1_1).token, below_1.tokens[1]);

  // Context room and wanted tokens cut it, keeping it connected.
  DraftTree small = propose(*s, 6, 1000);
  EXPECT_EQ(small.size(), 6);
  DraftTree shallow = propose(*s, 1000, 2);
  EXPECT_EQ(shallow.size(), 12);
  EXPECT_EQ(shallow.max_depth(), 2);
  EXPECT_TRUE(propose(*s, 0, 5).empty());

  // T > 0 (sample_tree=true, the default, as EAGLE-1): the same shape, each node drawn without replacement from its
  // parent's processed head distribution q, recorded for the verifier (siblings distinct: DraftTree::add checks).
  Sampler hot(SamplingParams{0.8, 0, 1.0}, 3);
  DraftTree sampled = propose(*s, 1000, 1000, &hot);
  ASSERT_EQ(sampled.size(), 25);
  for (int32_t i = 0; i < sampled.size(); ++i) {
    const DraftNode& n = sampled.node(i);
    EXPECT_EQ(n.parent, spec.parent[i]) << "node " << i;
    ASSERT_GE(n.distribution, 0) << "node " << i;
    EXPECT_TRUE(n.without_replacement) << "node " << i;
    EXPECT_FLOAT_EQ(n.confidence, sampled.distribution(n.distribution)[n.token].item<float>()) << "node " << i;
  }
  // sample_tree=false: the deterministic top-k at T > 0 too (EAGLE-2's way).
  auto top_k = started("static-tree", {"sample_tree=false"});
  Sampler hot2(SamplingParams{0.8, 0, 1.0}, 3);
  DraftTree ranked = propose(*top_k, 1000, 1000, &hot2);
  ASSERT_EQ(ranked.size(), 25);
  expect_valid_tree(ranked, "static-tree sample_tree=false T>0");
}

TEST_F(EagleStrategies, StaticTreeOtherShapesAndErrors) {
  auto chain = started("static-tree", {"tree=chain5"});
  DraftTree tree = propose(*chain);
  ASSERT_EQ(tree.size(), 5);
  for (int32_t i = 0; i < 5; ++i) EXPECT_EQ(tree.node(i).parent, i - 1);

  const std::string bad = temp_dir() + "/bad_tree.json";
  std::ofstream(bad) << "{\"paths\": [[0], [2, 0]]}";
  const std::string m = error_of([&] { started("static-tree", {"tree=" + bad}); });
  EXPECT_NE(m.find(bad), std::string::npos) << m;
  EXPECT_NE(m.find("paths[1]"), std::string::npos) << m;
  const std::string big = temp_dir() + "/big_rank.json";
  std::ofstream(big) << "{\"paths\": [[0], [500]]}";
  EXPECT_NE(error_of([&] { started("static-tree", {"tree=" + big}); }).find("97"), std::string::npos);
}

TEST_F(EagleStrategies, Eagle2DefaultIsTheRerankedFullTree) {
  // The paper's settings: 59 drafted nodes (60 verified with the root), depth 6, top-10 expansion.
  auto s = started("eagle2", {});
  DraftTree tree = propose(*s);
  ASSERT_EQ(tree.size(), 59);
  EXPECT_LE(tree.max_depth(), 6);
  expect_valid_tree(tree, "eagle2");

  // Without the budget the strategy returns every drafted node: 10 + 5 x 100. Reranking that full tree by hand
  // must give exactly the default draft.
  auto all = started("eagle2", {"total_tokens=100000"});
  DraftTree full = propose(*all);
  ASSERT_EQ(full.size(), 10 + 5 * 100);
  std::map<int32_t, int> per_depth;
  for (const auto& n : full.nodes()) ++per_depth[n.depth];
  EXPECT_EQ(per_depth, (std::map<int32_t, int>{{1, 10}, {2, 100}, {3, 100}, {4, 100}, {5, 100}, {6, 100}}));
  // Only the top-10 of a layer by value get children.
  for (int32_t depth = 1; depth < 6; ++depth) {
    std::vector<int32_t> layer, parents;
    for (int32_t i = 0; i < full.size(); ++i)
      if (full.node(i).depth == depth) layer.push_back(i);
    for (int32_t i : layer)
      if (!full.children(i).empty()) parents.push_back(i);
    auto best = eagle2_select(full, layer, 10, true);
    std::sort(best.begin(), best.end());
    EXPECT_EQ(parents, best) << "depth " << depth;
  }
  DraftTree by_hand = full.subtree(eagle2_rerank(full, 59));
  ASSERT_EQ(by_hand.size(), tree.size());
  for (int32_t i = 0; i < tree.size(); ++i) {
    EXPECT_EQ(by_hand.node(i).token, tree.node(i).token) << i;
    EXPECT_EQ(by_hand.node(i).parent, tree.node(i).parent) << i;
  }
}

TEST_F(EagleStrategies, Eagle2SwitchesGiveValidTreesWithinBudget) {
  for (const char* rank_by : {"value", "confidence"}) {
    for (const char* rerank : {"true", "false"}) {
      for (int total : {60, 13, 2, 1}) {
        const std::string what = std::string("rank_by=") + rank_by + " rerank=" + rerank + " total=" + std::to_string(total);
        auto s = started("eagle2", {std::string("rank_by=") + rank_by, std::string("rerank=") + rerank,
                                    "total_tokens=" + std::to_string(total), "depth=4", "top_k=5"});
        DraftTree tree = propose(*s);
        EXPECT_LE(tree.size(), total - 1) << what;
        EXPECT_LE(tree.max_depth(), 4) << what;
        expect_valid_tree(tree, what);
        if (std::string(rerank) == "false" && total == 60) {
          EXPECT_EQ(tree.size(), 5 * 4) << what << ": the expanded nodes, top_k per layer";
          std::map<int32_t, int> per_depth;
          for (const auto& n : tree.nodes()) ++per_depth[n.depth];
          EXPECT_EQ(per_depth, (std::map<int32_t, int>{{1, 5}, {2, 5}, {3, 5}, {4, 5}})) << what;
        }
        if (std::string(rerank) == "true" && total > 1) EXPECT_EQ(tree.size(), total - 1) << what;
        // Room and wanted tokens are respected.
        DraftTree cut = propose(*s, 3, 2);
        EXPECT_LE(cut.size(), 3) << what;
        EXPECT_LE(cut.max_depth(), 2) << what;
        EXPECT_TRUE(propose(*s, 0, 10).empty()) << what;
      }
    }
  }
  EXPECT_NE(error_of([&] { started("eagle2", {"rank_by=entropy"}); }).find("rank_by"), std::string::npos);
  EXPECT_NE(error_of([&] { started("eagle2", {"top_k=0"}); }).find("top_k"), std::string::npos);
  EXPECT_NE(error_of([&] { started("eagle2", {"head_seed=3", "head=/nonexistent"}); }).find("head_seed"),
            std::string::npos);
  EXPECT_NE(error_of([&] { started("eagle2", {"head=/nonexistent/head"}); }).find("/nonexistent/head"),
            std::string::npos);
}

// The decoder's per-cycle forward time (ForwardClock): forwards add to it, nested scopes count once, and a cycle's
// forwards never exceed the cycle.
// sample_tree=true at T > 0: each layer's slots chosen by prior value before they are drawn, then drawn without
// replacement; no reranking, so every node drawn stays. At T = 0 the option changes nothing.
TEST_F(EagleStrategies, Eagle2SampledTreeLayersAreChosenBeforeTheyAreDrawn) {
  const std::vector<std::string> opts{"sample_tree=true", "total_tokens=20", "depth=4", "top_k=5"};
  auto s = started("eagle2", opts);
  Sampler hot(SamplingParams{0.8, 0, 1.0}, 5);
  DraftTree tree = propose(*s, 1000, 1000, &hot);
  EXPECT_EQ(tree.size(), 19);  // budget 20 - 1: layers of 5, 5, 5, 4
  std::map<int32_t, int> per_depth;
  for (int32_t i = 0; i < tree.size(); ++i) {
    const DraftNode& n = tree.node(i);
    ++per_depth[n.depth];
    ASSERT_GE(n.distribution, 0);
    EXPECT_TRUE(n.without_replacement);
    EXPECT_FLOAT_EQ(n.confidence, tree.distribution(n.distribution)[n.token].item<float>());
    // Every node but the last layer's was expanded: its parent is in the previous layer, all of which grew.
    if (n.parent >= 0) EXPECT_EQ(tree.node(n.parent).depth, n.depth - 1);
  }
  EXPECT_EQ(per_depth, (std::map<int32_t, int>{{1, 5}, {2, 5}, {3, 5}, {4, 4}}));
  // Greedy: the deterministic reranked tree, as without the option.
  auto plain = started("eagle2", {"total_tokens=20", "depth=4", "top_k=5"});
  auto sampled_option = started("eagle2", opts);
  const DraftTree a = propose(*plain), b = propose(*sampled_option);
  ASSERT_EQ(a.size(), b.size());
  for (int32_t i = 0; i < a.size(); ++i) EXPECT_EQ(a.node(i).token, b.node(i).token);
  // Cutting by drawn values would bias the output: refused.
  EXPECT_NE(error_of([&] { started("eagle2", {"sample_tree=true", "total_tokens=auto"}); }).find("total_tokens=auto"),
            std::string::npos);
  EXPECT_NE(error_of([&] { started("eagle2", {"sample_tree=true", "rerank=false"}); }).find("rerank=false"),
            std::string::npos);
}

TEST_F(EagleStrategies, ForwardClockTimesEachCyclesForwards) {
  const double before = ForwardClock::seconds();
  KvCache cache = target->make_cache(64);
  target->forward_chain(cache, prompt);
  EXPECT_GT(ForwardClock::seconds(), before);
  {
    ForwardClock::Scope outer;
    const double inside = ForwardClock::seconds();
    target->forward_chain(cache, {7});
    EXPECT_EQ(ForwardClock::seconds(), inside) << "a forward inside a timed scope is counted by the outer one";
  }
  auto s = make_strategy("eagle2", StrategyContext{*target}, StrategyOptions::parse({"total_tokens=6", "depth=3"}));
  GenerationConfig config;
  config.max_new_tokens = 24;
  const auto result = SpeculativeDecoder(*target, *s).generate(prompt, config);
  ASSERT_FALSE(result.cycles.empty());
  for (const auto& c : result.cycles) {
    EXPECT_GT(c.forward_seconds, 0.0);
    EXPECT_LE(c.forward_seconds, c.draft_seconds + c.verify_seconds + 1e-6);
  }
  EXPECT_GE(result.overhead_per_cycle(), -1e-6);
}

TEST_F(EagleStrategies, EagleChainGreedyAndSampled) {
  auto s = started("eagle-chain", {"depth=4"});
  DraftTree tree = propose(*s);
  ASSERT_EQ(tree.size(), 4);
  for (int32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(tree.node(i).parent, i - 1);
    EXPECT_EQ(tree.node(i).distribution, -1);
  }
  EXPECT_EQ(propose(*s, 2, 10).size(), 2);
  EXPECT_EQ(propose(*s, 10, 3).size(), 3);

  // T > 0: each token drawn from the processed head distribution q, recorded for the verifier's p/q.
  Sampler hot(SamplingParams{0.9, 20, 0.95}, 11);
  DraftTree sampled = propose(*s, 1000, 1000, &hot);
  ASSERT_EQ(sampled.size(), 4);
  for (int32_t i = 0; i < 4; ++i) {
    const DraftNode& n = sampled.node(i);
    ASSERT_GE(n.distribution, 0);
    const at::Tensor& q = sampled.distribution(n.distribution);
    EXPECT_NEAR(q.sum().item<double>(), 1.0, 1e-5);
    EXPECT_LE((q > 0).sum().item<int64_t>(), 20) << "top_k=20 applies to q too";
    EXPECT_FLOAT_EQ(n.confidence, q[n.token].item<float>());
    EXPECT_GT(n.confidence, 0.0f);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The drafter: cache sync and tree attention, against head chains computed from scratch.

// observe_later() (EAGLE-2 auto while it does not draft) keeps the pairs and feeds them in one forward when drafting
// resumes: the same head rows, so the same drafts bit for bit on the native path, for fewer head forwards.
TEST(EagleDrafterDeferred, ObserveLaterGivesTheDraftsObserveGives) {
  auto target = tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Native);
  std::shared_ptr<const EagleHead> head = EagleHead::random(*target, 3);
  const std::vector<int64_t> seq{1, 5, 9, 26, 53, 58, 12, 93, 40, 41, 42, 43, 44};
  KvCache cache = target->make_cache(32);
  const auto out = target->forward_chain(cache, seq);
  Sampler greedy{SamplingParams{}, 0};
  const std::vector<int64_t> p(seq.begin(), seq.begin() + 6);
  for (bool resume_by_observe : {false, true}) {
    SCOPED_TRACE(resume_by_observe ? "resumed by observe" : "resumed by start_tree");
    EagleDrafter now(head), later(head);
    now.begin(p, out.features.narrow(0, 0, 6), seq[6]);
    later.begin(p, out.features.narrow(0, 0, 6), seq[6]);
    // Three cycles that drafted nothing: the root verified alone, the next root its result.
    for (int64_t i = 6; i < 9; ++i) {
      VerifyResult r;
      r.tokens = {seq[i + 1]};
      r.features = out.features.narrow(0, i, 1);
      now.observe(r);
      later.observe_later(r);
    }
    int64_t end = 10;
    if (resume_by_observe) {  // then a cycle that accepted two nodes
      VerifyResult r;
      r.accepted_nodes = {0, 1};
      r.tokens = {seq[10], seq[11], seq[12]};
      r.features = out.features.narrow(0, 9, 3);
      now.observe(r);
      later.observe(r);
      end = 13;
    }
    EXPECT_LT(later.head_forwards(), now.head_forwards());
    const DraftRequest request{std::vector<int64_t>(seq.begin(), seq.begin() + end), 100, 100, greedy};
    now.start_tree(request);
    later.start_tree(request);
    DraftTree tree;
    const at::Tensor a = now.expand(tree, {EagleDrafter::kRoot}), b = later.expand(tree, {EagleDrafter::kRoot});
    EXPECT_TRUE(at::equal(a, b));
    tree.add(top_candidates(a, 1)[0].tokens[0], EagleDrafter::kRoot, 0.5f);
    EXPECT_TRUE(at::equal(now.expand(tree, {0}), later.expand(tree, {0})));
  }
}

TEST_F(EagleStrategies, DrafterSyncEqualsAFreshStartOnTheLongerSequence) {
  // The target's true features of a longer sequence; the prompt is its first 8 tokens.
  std::vector<int64_t> seq{1, 5, 9, 26, 53, 58, 12, 93, 40, 41, 42, 43};
  KvCache cache = target->make_cache(32);
  auto out = target->forward_chain(cache, seq);
  auto head = std::shared_ptr<const EagleHead>(EagleHead::random(*target, 2));
  const std::vector<int64_t> p(seq.begin(), seq.begin() + 8);

  EagleDrafter synced(head);
  synced.begin(p, out.features.narrow(0, 0, 8), seq[8]);
  // A draft whose rows must all be dropped by observe().
  std::vector<int64_t> s1(seq.begin(), seq.begin() + 9);
  synced.start_tree(DraftRequest{s1, 100, 100, greedy});
  DraftTree draft;
  draft.add(7, -1, 0.5f);
  draft.add(8, -1, 0.5f);
  draft.add(9, 0, 0.5f);
  synced.expand(draft, {0, 1});
  synced.expand(draft, {2});
  // The verifier accepted seq[9], seq[10]; next root seq[11]; features of the old root and the accepted nodes.
  VerifyResult result;
  result.accepted_nodes = {0, 2};
  result.tokens = {seq[9], seq[10], seq[11]};
  result.features = out.features.narrow(0, 8, 3);
  synced.observe(result);

  EagleDrafter fresh(head);
  fresh.begin(std::vector<int64_t>(seq.begin(), seq.begin() + 11), out.features.narrow(0, 0, 11), seq[11]);

  DraftRequest request{seq, 100, 100, greedy};
  synced.start_tree(request);
  fresh.start_tree(request);
  DraftTree empty;
  EXPECT_LT(rel_diff(synced.expand(empty, {EagleDrafter::kRoot}), fresh.expand(empty, {EagleDrafter::kRoot})), 1e-5);

  // Out of step: a sequence the drafter has not seen is an error, not a silent bad draft.
  std::vector<int64_t> other = seq;
  other.push_back(3);
  EXPECT_THROW(synced.start_tree(DraftRequest{other, 100, 100, greedy}), Error);
}

TEST_F(EagleStrategies, DrafterExpandEqualsHeadChains) {
  auto head = std::shared_ptr<const EagleHead>(EagleHead::random(*target, 4));
  at::Tensor features;
  const int64_t first = prefill(features);
  std::vector<int64_t> seq = prompt;
  seq.push_back(first);
  EagleDrafter drafter(head);
  drafter.begin(prompt, features, first);
  drafter.start_tree(DraftRequest{seq, 100, 100, greedy});

  //   root -> n0 (30) -> n2 (32)
  //        -> n1 (31) -> n3 (33) -> n4 (34)
  DraftTree tree;
  tree.add(30, -1, 0.5f);
  tree.add(31, -1, 0.5f);
  auto l1 = drafter.expand(tree, {0, 1});
  tree.add(32, 0, 0.5f);
  tree.add(33, 1, 0.5f);
  auto l2 = drafter.expand(tree, {3, 2});  // any order
  tree.add(34, 3, 0.5f);
  auto l3 = drafter.expand(tree, {4});
  auto mixed_root = drafter.expand(tree, {EagleDrafter::kRoot});

  // Reference: the head run as a plain chain over the prompt pairs, then (node, predicted feature of its parent)
  // at the root pair's position + depth, feeding each prediction forward by hand.
  const int64_t P = static_cast<int64_t>(prompt.size());
  auto chain = [&](const std::vector<int64_t>& path_tokens) {
    KvCache cache = head->make_cache(64);
    std::vector<int64_t> shifted(prompt.begin() + 1, prompt.end());
    shifted.push_back(first);
    auto out = head->forward(cache, long_tensor(shifted), features, at::arange(P, at::kLong));
    at::Tensor predicted = out.narrow(0, P - 1, 1);
    for (size_t k = 0; k < path_tokens.size(); ++k)
      predicted = head->forward(cache, long_tensor({path_tokens[k]}), predicted,
                                long_tensor({P - 1 + static_cast<int64_t>(k) + 1}));
    return head->logits(predicted)[0];
  };
  EXPECT_LT(rel_diff(mixed_root[0], chain({})), 1e-5);
  EXPECT_LT(rel_diff(l1[0], chain({30})), 1e-5);
  EXPECT_LT(rel_diff(l1[1], chain({31})), 1e-5);
  EXPECT_LT(rel_diff(l2[0], chain({31, 33})), 1e-5);
  EXPECT_LT(rel_diff(l2[1], chain({30, 32})), 1e-5);
  EXPECT_LT(rel_diff(l3[0], chain({31, 33, 34})), 1e-5);

  // Misuse is an error: a node twice, a node before its parent.
  EXPECT_THROW(drafter.expand(tree, {4}), Error);
  tree.add(35, 2, 0.5f);
  tree.add(36, 5, 0.5f);
  EXPECT_THROW(drafter.expand(tree, {6}), Error);
}

// Every EAGLE strategy, through the real decoding loop, gives vanilla's tokens (T = 0) on the tiny model, and a
// long generation crosses the head cache's growth.
TEST_F(EagleStrategies, GreedyDecodingEqualsVanilla) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> configs{
      {"eagle-chain", {}},
      {"eagle-chain", {"depth=1"}},
      {"static-tree", {}},
      {"eagle2", {}},
      {"eagle2", {"total_tokens=8", "depth=3", "top_k=3", "rank_by=confidence", "rerank=false"}},
  };
  GenerationConfig gen;
  gen.max_new_tokens = 100;
  for (const auto& [name, options] : configs) {
    for (const auto& p : {prompt, std::vector<int64_t>{3}, std::vector<int64_t>{4, 4, 4, 4}}) {
      auto want = generate_vanilla(*target, p, gen);
      auto strategy = make_strategy(name, StrategyContext{*target}, StrategyOptions::parse(options));
      SpeculativeDecoder decoder(*target, *strategy);
      auto got = decoder.generate(p, gen);
      EXPECT_EQ(got.tokens, want.tokens) << name;
      EXPECT_EQ(got.stop_reason, want.stop_reason) << name;
    }
  }
}

}  // namespace

namespace {

// A long generation: the head cache (sized prompt + 512 at begin) must grow mid-sequence without changing a token.
TEST(EagleLongGeneration, HeadCacheGrowthKeepsDecodingExact) {
  ModelConfig c = tiny_config();
  c.max_position_embeddings = 1024;
  LlamaWeights w = random_llama_weights(c, 7, ComputeOptions{});
  // The same scaling as tiny_model(): peaked, varied logits (no near-ties between computation orders).
  w.embed = w.embed * 50.0;
  for (auto& L : w.layers) {
    L.wqkv = L.wqkv * 10.0;
    L.wo = L.wo * 10.0;
    L.w_gate_up = L.w_gate_up * 10.0;
    L.w_down = L.w_down * 10.0;
  }
  w.lm_head = w.lm_head * 50.0;
  use_column_major(w);
  LlamaModel target(c, std::move(w), ComputeOptions{});
  GenerationConfig gen;
  gen.max_new_tokens = 700;
  const std::vector<int64_t> p{1, 2, 3};
  auto want = generate_vanilla(target, p, gen);
  ASSERT_EQ(want.tokens.size(), 700u);
  for (const char* name : {"eagle-chain", "eagle2"}) {
    auto strategy = make_strategy(name, StrategyContext{target}, StrategyOptions{});
    SpeculativeDecoder decoder(target, *strategy);
    EXPECT_EQ(decoder.generate(p, gen).tokens, want.tokens) << name;
  }
}

}  // namespace
