// Extra rows in the verification forward (DraftTree::add_extra_row). Against independent truths: the same tree
// verified without them (bit for bit on the native path: tokens, features, logits, cache), and, for each extra
// row's logits, a separate forward of the plain causal sequence the row sees (the committed context, the root, the
// rows it lists in order, itself), on both CPU paths. Plus the mask layout worked by hand and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/decoding/draft_tree.h"
#include "core/decoding/verifier.h"
#include "model/model_fixtures.h"
#include "test_errors.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

const std::vector<int64_t> kPrefix{3, 14, 15, 92, 65, 35, 89};  // kPrefix.back() is the root

// The target's greedy continuation of kPrefix, one chain forward at a time.
std::vector<int64_t> greedy_continuation(const LlamaModel& model, int count) {
  std::vector<int64_t> greedy;
  KvCache c = model.make_cache(64);
  auto out = model.forward_chain(c, kPrefix);
  for (int i = 0; i < count; ++i) {
    greedy.push_back(out.logits[out.logits.size(0) - 1].argmax().item<int64_t>());
    out = model.forward_chain(c, {greedy.back()});
  }
  return greedy;
}

// A random tree: a prefix of the greedy path (so the verifier accepts something) plus distractors anywhere.
DraftTree random_tree(std::mt19937& rng, const std::vector<int64_t>& greedy) {
  DraftTree tree;
  int32_t parent = -1;
  const int depth = static_cast<int>(rng() % 5);
  for (int d = 0; d < depth; ++d) parent = tree.add(greedy[d], parent);
  for (int k = 0; k < static_cast<int>(rng() % 6); ++k) {
    const int32_t p = static_cast<int32_t>(rng() % (tree.size() + 1)) - 1;
    const int64_t token = static_cast<int64_t>(rng() % 97);
    bool duplicate = false;  // a second child with the same token would be verified twice: keep the tree a trie
    for (int32_t c : p < 0 ? tree.children_of_root() : tree.children(p)) duplicate |= tree.node(c).token == token;
    if (!duplicate) tree.add(token, p);
  }
  return tree;
}

// What an extra row sees, as the test's own record (independent of DraftTree's storage).
struct Seen {
  std::vector<int32_t> nodes, rows;
};

// Adds m extra rows whose visible sets are closed (each row continues the root, the path to a tree node, or an
// earlier extra row's whole sequence), so that each one reads as one causal sequence. Lists go in shuffled.
std::vector<Seen> add_random_extra_rows(std::mt19937& rng, DraftTree& tree, int m) {
  std::vector<Seen> seen;
  for (int k = 0; k < m; ++k) {
    Seen s;
    const int base = static_cast<int>(rng() % 3);
    if (base == 1 && tree.size() > 0) {
      for (int32_t j = static_cast<int32_t>(rng() % tree.size()); j >= 0; j = tree.node(j).parent) s.nodes.push_back(j);
    } else if (base == 2 && k > 0) {
      const int32_t r = static_cast<int32_t>(rng() % k);
      s = seen[r];
      s.rows.push_back(r);
    }
    std::sort(s.nodes.begin(), s.nodes.end());
    std::sort(s.rows.begin(), s.rows.end());
    auto nodes = s.nodes, rows = s.rows;
    std::shuffle(nodes.begin(), nodes.end(), rng);
    std::shuffle(rows.begin(), rows.end(), rng);
    tree.add_extra_row(static_cast<int64_t>(rng() % 97), 1 + static_cast<int32_t>(rng() % 8), rows, nodes);
    seen.push_back(s);
  }
  return seen;
}

struct Verified {
  VerifyResult result;
  KvCache cache;
};

Verified verify(const LlamaModel& model, const DraftTree& tree, const SamplingParams& sp = {}, uint64_t seed = 0) {
  KvCache cache = model.make_cache(64);
  model.forward_chain(cache, std::vector<int64_t>(kPrefix.begin(), kPrefix.end() - 1));
  Sampler sampler(sp, seed);
  Verifier verifier(model, sampler);
  VerifyResult r = verifier.verify(cache, kPrefix.back(), tree);
  return {std::move(r), std::move(cache)};
}

void expect_same_cache(const KvCache& a, const KvCache& b) {
  ASSERT_EQ(a.length(), b.length());
  for (int64_t layer = 0; layer < a.num_layers(); ++layer) {
    EXPECT_TRUE(at::equal(a.keys(layer, a.length()), b.keys(layer, b.length()))) << "layer " << layer;
    EXPECT_TRUE(at::equal(a.values(layer, a.length()), b.values(layer, b.length()))) << "layer " << layer;
  }
}

TEST(VerifierExtraRows, TreeResultsAreBitIdenticalWithAndWithoutThemOnTheNativePath) {
  auto model = tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Native);
  const auto greedy = greedy_continuation(*model, 6);
  std::mt19937 rng(11);
  int accepted = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const DraftTree plain = random_tree(rng, greedy);
    DraftTree with_extra = plain;
    add_random_extra_rows(rng, with_extra, 1 + static_cast<int>(rng() % 9));
    for (const SamplingParams& sp : {SamplingParams{}, SamplingParams{1.0, 0, 0.9}}) {
      Verified a = verify(*model, plain, sp, 100 + trial), b = verify(*model, with_extra, sp, 100 + trial);
      ASSERT_EQ(a.result.accepted_nodes, b.result.accepted_nodes) << "trial " << trial;
      ASSERT_EQ(a.result.tokens, b.result.tokens) << "trial " << trial;
      EXPECT_TRUE(at::equal(a.result.features, b.result.features)) << "trial " << trial;
      expect_same_cache(a.cache, b.cache);
      EXPECT_EQ(b.cache.length(), static_cast<int64_t>(kPrefix.size() + b.result.accepted_nodes.size()));
      EXPECT_FALSE(a.result.extra_logits.defined());
      ASSERT_EQ(b.result.extra_logits.size(0), with_extra.extra_size());
      accepted += static_cast<int>(a.result.accepted_nodes.size());
    }
    // The forward itself: the tree's rows' logits do not change by a bit.
    KvCache c1 = model->make_cache(64), c2 = model->make_cache(64);
    for (KvCache* c : {&c1, &c2}) model->forward_chain(*c, std::vector<int64_t>(kPrefix.begin(), kPrefix.end() - 1));
    const int64_t start = c1.length();
    auto run = [&](KvCache& c, const DraftTree& t) {
      return model->forward(c, long_tensor(t.tokens_with_root(kPrefix.back())), long_tensor(t.positions_with_root(start)),
                            t.attention_mask_with_root());
    };
    auto x = run(c1, plain), y = run(c2, with_extra);
    EXPECT_TRUE(at::equal(x.logits, y.logits.narrow(0, 0, plain.size() + 1))) << "trial " << trial;
  }
  EXPECT_GT(accepted, 20) << "the trees should follow the greedy path often enough to test acceptance";
}

TEST(VerifierExtraRows, LogitsMatchASeparateForwardOfTheSequenceEachRowSees) {
  for (CpuPath path : {CpuPath::Native, CpuPath::Reference}) {
    auto model = tiny_model(at::kFloat, 2, 7, false, 97, path);
    const auto greedy = greedy_continuation(*model, 6);
    std::mt19937 rng(23);
    for (int trial = 0; trial < 25; ++trial) {
      DraftTree tree = random_tree(rng, greedy);
      const auto seen = add_random_extra_rows(rng, tree, 1 + static_cast<int>(rng() % 9));
      Verified v = verify(*model, tree);
      const int64_t start = static_cast<int64_t>(kPrefix.size()) - 1;
      for (int32_t k = 0; k < tree.extra_size(); ++k) {
        // The naive truth: context, root, the seen nodes (flat order), the seen rows (in order), the row itself,
        // as one causal chain with their own positions, in a fresh cache.
        std::vector<int64_t> tokens{kPrefix.back()}, positions{start};
        for (int32_t i : seen[k].nodes) {
          tokens.push_back(tree.node(i).token);
          positions.push_back(start + tree.node(i).depth);
        }
        for (int32_t r : seen[k].rows) {
          tokens.push_back(tree.extra_rows()[r].token);
          positions.push_back(start + tree.extra_rows()[r].depth);
        }
        tokens.push_back(tree.extra_rows()[k].token);
        positions.push_back(start + tree.extra_rows()[k].depth);
        KvCache c = model->make_cache(64);
        model->forward_chain(c, std::vector<int64_t>(kPrefix.begin(), kPrefix.end() - 1));
        auto naive = model->forward(c, long_tensor(tokens), long_tensor(positions));
        const at::Tensor want = naive.logits[naive.logits.size(0) - 1];
        EXPECT_LT(rel_diff(v.result.extra_logits[k], want), 1e-4)
            << (path == CpuPath::Native ? "native" : "reference") << " trial " << trial << " extra row " << k;
      }
    }
  }
}

TEST(VerifierExtraRows, MaskLayoutWorkedByHand) {
  DraftTree t;
  t.add(10, -1);  // node 0, row 1
  t.add(11, 0);   // node 1, row 2
  t.add(12, -1);  // node 2, row 3
  EXPECT_EQ(t.add_extra_row(20, 1, {}), 0);        // row 4: root only
  EXPECT_EQ(t.add_extra_row(21, 3, {0}, {1, 0}), 1);  // row 5: nodes 0, 1 and extra row 0
  EXPECT_EQ(t.add_extra_row(22, 2, {1}), 2);       // row 6: extra row 1 only (not what row 1 sees)
  EXPECT_EQ(t.tokens_with_root(7), (std::vector<int64_t>{7, 10, 11, 12, 20, 21, 22}));
  EXPECT_EQ(t.positions_with_root(40), (std::vector<int64_t>{40, 41, 42, 41, 41, 43, 42}));
  const std::vector<std::vector<int>> want = {
      {1, 0, 0, 0, 0, 0, 0},  // root
      {1, 1, 0, 0, 0, 0, 0},  // node 0
      {1, 1, 1, 0, 0, 0, 0},  // node 1
      {1, 0, 0, 1, 0, 0, 0},  // node 2
      {1, 0, 0, 0, 1, 0, 0},  // extra 0
      {1, 1, 1, 0, 1, 1, 0},  // extra 1
      {1, 0, 0, 0, 0, 1, 1},  // extra 2
  };
  const at::Tensor mask = t.attention_mask_with_root();
  ASSERT_EQ(mask.size(0), 7);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 7; ++j) EXPECT_EQ(mask[i][j].item<bool>(), want[i][j] == 1) << i << "," << j;
  // subtree renumbers the nodes an extra row sees.
  const DraftTree s = t.subtree({0, 1});
  ASSERT_EQ(s.extra_size(), 3);
  EXPECT_EQ(s.extra_rows()[1].sees_nodes, (std::vector<int32_t>{1, 0}));
  expect_error([&] { t.subtree({0, 2}); }, {"extra row 1 sees node 1", "not kept"});
}

TEST(VerifierExtraRows, MalformedRowsAreErrors) {
  DraftTree t;
  t.add(10, -1);
  t.add(11, 0);
  expect_error([&] { t.add_extra_row(5, 0, {}); }, {"depth 0", ">= 1"});
  expect_error([&] { t.add_extra_row(5, 1, {0}); }, {"extra row 0 sees extra row 0", "earlier"});
  t.add_extra_row(5, 1, {});
  expect_error([&] { t.add_extra_row(5, 1, {-1}); }, {"sees extra row -1"});
  expect_error([&] { t.add_extra_row(5, 1, {1}); }, {"extra row 1 sees extra row 1", "0..0"});
  expect_error([&] { t.add_extra_row(5, 1, {}, {2}); }, {"sees node 2", "existing node (0..1)"});
  expect_error([&] { t.add_extra_row(5, 1, {}, {-1}); }, {"sees node -1"});
  EXPECT_EQ(t.extra_size(), 1) << "a refused row is not added";
  // Rows the cache has no room for: the verifier refuses before the forward and leaves the cache as it was.
  auto model = tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Native);
  KvCache cache = model->make_cache(static_cast<int64_t>(kPrefix.size()) + 2);  // root + 2 nodes, no room for more
  model->forward_chain(cache, std::vector<int64_t>(kPrefix.begin(), kPrefix.end() - 1));
  Sampler sampler(SamplingParams{});
  Verifier verifier(*model, sampler);
  expect_error([&] { verifier.verify(cache, kPrefix.back(), t); }, {"context full"});
  EXPECT_EQ(cache.length(), static_cast<int64_t>(kPrefix.size()) - 1);
}

}  // namespace
