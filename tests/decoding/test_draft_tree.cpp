// DraftTree flattening for trees of every shape, and greedy verification on random trees, each against a naive
// reference: ancestors by walking parent links one at a time, the target's greedy path by separate chain forwards.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "core/decoding/draft_tree.h"
#include "core/decoding/verifier.h"
#include "model/model_fixtures.h"
#include "test_errors.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

// Calls f(parents) for every parent array of n nodes with parent[i] in [-1, i): every tree shape in flat order.
void for_every_shape(int n, const std::function<void(const std::vector<int32_t>&)>& f) {
  std::vector<int32_t> parent(n, -1);
  std::function<void(int)> rec = [&](int i) {
    if (i == n) return f(parent);
    for (int32_t p = -1; p < i; ++p) {
      parent[i] = p;
      rec(i + 1);
    }
  };
  rec(0);
}

bool naive_is_ancestor_or_self(const std::vector<int32_t>& parent, int32_t a, int32_t node) {
  for (int32_t x = node; x != -1; x = parent[x])
    if (x == a) return true;
  return false;
}

int32_t naive_depth(const std::vector<int32_t>& parent, int32_t node) {
  int32_t d = 0;
  for (int32_t x = node; x != -1; x = parent[x]) ++d;
  return d;
}

TEST(DraftTree, FlatteningMatchesNaiveReferenceForEveryShapeUpTo6Nodes) {
  int shapes = 0;
  for (int n = 0; n <= 6; ++n) {
    for_every_shape(n, [&](const std::vector<int32_t>& parent) {
      ++shapes;
      DraftTree t;
      for (int i = 0; i < n; ++i) t.add(100 + i, parent[i], 0.5f);
      auto mask = t.attention_mask_with_root();
      auto pos = t.positions_with_root(40);
      auto tok = t.tokens_with_root(7);
      ASSERT_EQ(mask.size(0), n + 1);
      EXPECT_EQ(tok[0], 7);
      EXPECT_EQ(pos[0], 40);
      EXPECT_TRUE(mask[0][0].item<bool>());
      for (int j = 1; j <= n; ++j) EXPECT_FALSE(mask[0][j].item<bool>());
      int leaves = 0;
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(tok[i + 1], 100 + i);
        EXPECT_EQ(pos[i + 1], 40 + naive_depth(parent, i));
        EXPECT_EQ(t.node(i).depth, naive_depth(parent, i));
        EXPECT_FLOAT_EQ(t.node(i).value, std::pow(0.5f, naive_depth(parent, i)));
        EXPECT_TRUE(mask[i + 1][0].item<bool>()) << "every node sees the root";
        for (int j = 0; j < n; ++j)
          ASSERT_EQ(mask[i + 1][j + 1].item<bool>(), naive_is_ancestor_or_self(parent, j, i))
              << "n " << n << " node " << i << " col " << j;
        bool leaf = true;
        for (int j = 0; j < n; ++j) leaf = leaf && parent[j] != i;
        leaves += leaf;
      }
      EXPECT_EQ(static_cast<int>(t.leaf_paths().size()), leaves);
      for (const auto& path : t.leaf_paths())
        for (size_t k = 1; k < path.size(); ++k) EXPECT_EQ(t.node(path[k]).parent, path[k - 1]);
    });
  }
  EXPECT_EQ(shapes, 1 + 1 + 2 + 6 + 24 + 120 + 720);
}

TEST(DraftTree, SubtreeKeepsAncestorClosedSetsAndRejectsOrphans) {
  DraftTree t;
  t.add(10, -1, 0.9f);  // 0
  t.add(11, 0, 0.8f);   // 1
  t.add(12, -1, 0.5f);  // 2
  t.add(13, 1, 0.7f);   // 3
  t.add(14, 2, 0.6f);   // 4
  auto s = t.subtree({0, 2, 4});
  ASSERT_EQ(s.size(), 3);
  EXPECT_EQ(s.node(2).token, 14);
  EXPECT_EQ(s.node(2).parent, 1);
  EXPECT_FLOAT_EQ(s.node(2).value, 0.5f * 0.6f);
  expect_error([&] { t.subtree({0, 3}); }, {"without its parent"});
  expect_error([&] { t.add(1, 7); }, {"parent 7"});
}

// Random trees over the tiny model in which some branches follow the target's greedy continuation: the verifier
// must accept exactly the longest greedy prefix the tree contains, then the target's next token.
TEST(Verifier, GreedyAcceptsTheLongestMatchingPathOnRandomTrees) {
  auto model = tiny_model();
  const std::vector<int64_t> prefix{3, 14, 15, 92, 65};
  // The greedy continuation, one chain forward at a time (the independent truth).
  std::vector<int64_t> greedy;
  {
    KvCache c = model->make_cache(32);
    auto out = model->forward_chain(c, prefix);
    for (int i = 0; i < 8; ++i) {
      greedy.push_back(out.logits[out.logits.size(0) - 1].argmax().item<int64_t>());
      out = model->forward_chain(c, {greedy.back()});
    }
  }
  std::mt19937 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    // Build: along the greedy path to a random depth, plus random distractor nodes everywhere.
    DraftTree tree;
    const int depth = static_cast<int>(rng() % 6);
    int32_t parent = -1;
    std::vector<int32_t> path_nodes;
    for (int d = 0; d < depth; ++d) {
      for (int k = 0; k < static_cast<int>(rng() % 3); ++k) {  // distractors before the right child
        int64_t tok = rng() % 97;
        if (tok != greedy[d]) tree.add(tok, parent, 0.1f);
      }
      parent = tree.add(greedy[d], parent, 0.9f);
      path_nodes.push_back(parent);
    }
    for (int k = 0; k < static_cast<int>(rng() % 5); ++k) {  // more distractors hanging off random nodes
      int32_t p = tree.size() ? static_cast<int32_t>(rng() % (tree.size() + 1)) - 1 : -1;
      const int64_t want = p < 0 ? greedy[0] : (tree.node(p).depth < 8 ? greedy[tree.node(p).depth] : -1);
      int64_t tok = rng() % 97;
      bool on_path = p < 0 || std::find(path_nodes.begin(), path_nodes.end(), p) != path_nodes.end();
      if (on_path && tok == want) continue;  // would add a second matching child
      tree.add(tok, p, 0.1f);
    }

    KvCache cache = model->make_cache(64);
    model->forward_chain(cache, std::vector<int64_t>(prefix.begin(), prefix.end() - 1));
    Sampler sampler(SamplingParams{});
    Verifier verifier(*model, sampler);
    auto r = verifier.verify(cache, prefix.back(), tree);
    ASSERT_EQ(r.accepted_nodes, path_nodes) << "trial " << trial;
    std::vector<int64_t> want(greedy.begin(), greedy.begin() + depth + 1);
    ASSERT_EQ(r.tokens, want) << "trial " << trial;
    ASSERT_EQ(cache.length(), static_cast<int64_t>(prefix.size()) + depth);
    ASSERT_EQ(r.features.size(0), depth + 1);
    ASSERT_EQ(static_cast<int32_t>(r.records.size()), tree.size());
    for (int32_t i = 0; i < tree.size(); ++i) {  // verification rows, as results files count them: root 0
      EXPECT_EQ(r.records[i].tree_index, i + 1);
      EXPECT_EQ(r.records[i].parent, tree.node(i).parent + 1);
      EXPECT_EQ(r.records[i].accepted, std::count(path_nodes.begin(), path_nodes.end(), i) == 1);
    }
    // After compaction the cache continues like a fresh run of prefix + accepted tokens.
    auto next = model->forward_chain(cache, {r.tokens.back()});
    EXPECT_EQ(next.logits[0].argmax().item<int64_t>(), greedy[depth + 1 < 8 ? depth + 1 : 7]) << "trial " << trial;
  }
}

}  // namespace
