// The forward's invariants, each checked against a simpler computation of the same thing:
//   one token at a time == one full-sequence forward;
//   a tree-masked forward == separate chain forwards of each root-to-node path;
//   tree forward + compaction to the accepted path + continuation == a fresh run of that path;
//   rollback (truncate) + other tokens == a fresh run.
// Parameterized over compute dtypes and GQA shapes. Differences are relative to the logits' scale: 1e-5 for
// float32; 0.1 for bfloat16, whose 8-bit mantissa compounds over layers (a masking or cache bug moves logits by
// their whole scale, so both bounds still catch one).
#include <gtest/gtest.h>

#include <tuple>

#include "core/model/llama_layer.h"
#include "core/model/rope.h"
#include "model_fixtures.h"
#include "test_errors.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

struct Case {
  at::ScalarType dtype;
  int64_t kv_heads;
  double tol;
  CpuPath path = CpuPath::Auto;  // float32 runs on the native path unless Reference
};

class ForwardEquivalence : public ::testing::TestWithParam<Case> {
 protected:
  std::unique_ptr<LlamaModel> model = tiny_model(GetParam().dtype, GetParam().kv_heads, 7, false, 97, GetParam().path);
  double tol = GetParam().tol;
  const std::vector<int64_t> prefix{3, 14, 15, 92, 65, 35};
};

TEST_P(ForwardEquivalence, IncrementalEqualsFullSequence) {
  std::vector<int64_t> seq{1, 5, 9, 26, 53, 58, 97 % 97, 93, 23, 84, 62, 64, 33, 83, 27, 95};
  KvCache full_cache = model->make_cache(32);
  auto full = model->forward_chain(full_cache, seq);
  KvCache inc_cache = model->make_cache(32);
  for (size_t i = 0; i < seq.size(); ++i) {
    auto out = model->forward_chain(inc_cache, {seq[i]});
    EXPECT_LT(rel_diff(out.logits[0], full.logits[i]), tol) << "position " << i;
    EXPECT_LT(rel_diff(out.features[0], full.features[i]), tol) << "position " << i;
  }
  // Mixed chunk sizes give the same answer too.
  KvCache chunk_cache = model->make_cache(32);
  model->forward_chain(chunk_cache, std::vector<int64_t>(seq.begin(), seq.begin() + 5));
  auto rest = model->forward_chain(chunk_cache, std::vector<int64_t>(seq.begin() + 5, seq.end()));
  EXPECT_LT(rel_diff(rest.logits, full.logits.narrow(0, 5, seq.size() - 5)), tol);
}

// A branching tree after the prefix. Flat order has parents before children.
//        a(0)            e(1)
//       /    \             |
//     b(2)   c(3)        f(5)
//      |
//     d(4)
struct Tree {
  std::vector<int64_t> tokens{40, 41, 42, 43, 44, 45};
  std::vector<int64_t> parent{-1, -1, 0, 0, 2, 1};
  std::vector<int64_t> depth() const {
    std::vector<int64_t> d(parent.size());
    for (size_t i = 0; i < parent.size(); ++i) d[i] = parent[i] < 0 ? 0 : d[parent[i]] + 1;
    return d;
  }
  std::vector<int64_t> path_to(int64_t node) const {  // tokens from the first level down to node
    std::vector<int64_t> p;
    for (int64_t i = node; i >= 0; i = parent[i]) p.insert(p.begin(), tokens[i]);
    return p;
  }
  at::Tensor ancestor_mask() const {
    const int64_t n = static_cast<int64_t>(tokens.size());
    auto m = at::zeros({n, n}, at::TensorOptions().dtype(at::kBool));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j >= 0; j = parent[j]) m[i][j] = true;
    return m;
  }
};

TEST_P(ForwardEquivalence, TreeMaskEqualsSeparateChains) {
  Tree tree;
  KvCache cache = model->make_cache(32);
  model->forward_chain(cache, prefix);
  const int64_t P = static_cast<int64_t>(prefix.size());
  std::vector<int64_t> pos;
  for (int64_t d : tree.depth()) pos.push_back(P + d);
  auto out = model->forward(cache, long_tensor(tree.tokens), long_tensor(pos), tree.ancestor_mask());

  for (int64_t node = 0; node < static_cast<int64_t>(tree.tokens.size()); ++node) {
    KvCache chain_cache = model->make_cache(32);
    std::vector<int64_t> chain = prefix;
    auto path = tree.path_to(node);
    chain.insert(chain.end(), path.begin(), path.end());
    auto ref = model->forward_chain(chain_cache, chain);
    EXPECT_LT(rel_diff(out.logits[node], ref.logits[chain.size() - 1]), tol) << "node " << node;
    EXPECT_LT(rel_diff(out.features[node], ref.features[chain.size() - 1]), tol) << "node " << node;
  }
}

TEST_P(ForwardEquivalence, CompactionThenContinuationEqualsFreshRun) {
  Tree tree;
  KvCache cache = model->make_cache(32);
  model->forward_chain(cache, prefix);
  const int64_t P = static_cast<int64_t>(prefix.size());
  std::vector<int64_t> pos;
  for (int64_t d : tree.depth()) pos.push_back(P + d);
  model->forward(cache, long_tensor(tree.tokens), long_tensor(pos), tree.ancestor_mask());

  // Accept the path a -> b -> d (flat rows 0, 2, 4) and continue with two more tokens.
  cache.keep_rows(P, {P + 0, P + 2, P + 4});
  ASSERT_EQ(cache.length(), P + 3);
  auto cont = model->forward_chain(cache, {77, 78});

  KvCache fresh = model->make_cache(32);
  std::vector<int64_t> seq = prefix;
  for (int64_t t : {40, 42, 44, 77, 78}) seq.push_back(t);
  auto ref = model->forward_chain(fresh, seq);
  EXPECT_LT(rel_diff(cont.logits, ref.logits.narrow(0, seq.size() - 2, 2)), tol);

  // Keeping a non-first branch (e -> f: rows 1, 5) works the same way.
  KvCache cache2 = model->make_cache(32);
  model->forward_chain(cache2, prefix);
  model->forward(cache2, long_tensor(tree.tokens), long_tensor(pos), tree.ancestor_mask());
  cache2.keep_rows(P, {P + 1, P + 5});
  auto cont2 = model->forward_chain(cache2, {79});
  KvCache fresh2 = model->make_cache(32);
  std::vector<int64_t> seq2 = prefix;
  for (int64_t t : {41, 45, 79}) seq2.push_back(t);
  auto ref2 = model->forward_chain(fresh2, seq2);
  EXPECT_LT(rel_diff(cont2.logits[0], ref2.logits[seq2.size() - 1]), tol);
}

TEST_P(ForwardEquivalence, TruncateThenOtherTokensEqualsFreshRun) {
  KvCache cache = model->make_cache(32);
  model->forward_chain(cache, prefix);
  model->forward_chain(cache, {10, 11, 12});
  cache.truncate(static_cast<int64_t>(prefix.size()) + 1);  // keep the 10, roll back 11 and 12
  auto out = model->forward_chain(cache, {20});
  KvCache fresh = model->make_cache(32);
  std::vector<int64_t> seq = prefix;
  seq.push_back(10);
  seq.push_back(20);
  auto ref = model->forward_chain(fresh, seq);
  EXPECT_LT(rel_diff(out.logits[0], ref.logits[seq.size() - 1]), tol);
}

TEST_P(ForwardEquivalence, LogitRowsAndFeatureLayers) {
  KvCache cache = model->make_cache(32);
  auto full = model->forward_chain(cache, prefix);
  // EAGLE-3's features: the raw residual after the given layers, side by side in the order asked; the logits stay
  // those of the plain forward.
  ASSERT_EQ(model->config().num_hidden_layers, 2);
  KvCache layered_cache = model->make_cache(32);
  ForwardOptions layers;
  layers.feature_layers = {1, 0, 1};
  auto layered = model->forward_chain(layered_cache, prefix, layers);
  const int64_t d = model->config().hidden_size;
  ASSERT_EQ(layered.features.sizes(), (std::vector<int64_t>{static_cast<int64_t>(prefix.size()), 3 * d}));
  EXPECT_TRUE(at::equal(layered.logits, full.logits));
  EXPECT_TRUE(at::equal(layered.features.narrow(1, 0, d), layered.features.narrow(1, 2 * d, d)));
  // The last layer's output, normed, is the plain forward's feature.
  const auto& w = model->weights();
  auto h = layered.features.narrow(1, 0, d).to(at::kFloat);
  auto normed = (h * at::rsqrt(h.pow(2).mean(-1, true) + model->config().rms_norm_eps)).to(GetParam().dtype) *
                w.norm;
  EXPECT_LT(rel_diff(normed, full.features), tol);
  // Layer 0's output: its attention and MLP over the embedding, recomputed here with the reference layer alone.
  KvCache one_layer = model->make_cache(32);
  const auto tokens = long_tensor(prefix);
  const auto positions = at::arange(static_cast<int64_t>(prefix.size()), at::TensorOptions().dtype(at::kLong));
  RotaryEmbedding rope(model->config(), model->options());
  const auto [cos, sin] = rope.at_positions(positions);
  const auto after0 = llama_decoder_layer(at::embedding(w.embed, tokens), w.layers[0], model->config(), one_layer, 0, 0,
                                          cos, sin, attention_mask({}, 0, tokens.size(0), model->options()));
  EXPECT_LT(rel_diff(layered.features.narrow(1, d, d).to(at::kFloat), after0.to(at::kFloat)), tol);
  KvCache refused = model->make_cache(32);
  layers.feature_layers = {2};
  expect_error([&] { model->forward_chain(refused, prefix, layers); }, {"feature layer 2", "[0, 2)"});

  KvCache cache2 = model->make_cache(32);
  ForwardOptions rows;
  rows.logits = ForwardOptions::Logits::Rows;
  rows.rows = long_tensor({4, 1});
  auto some = model->forward_chain(cache2, prefix, rows);
  ASSERT_EQ(some.logits.size(0), 2);
  EXPECT_LT(rel_diff(some.logits[0], full.logits[4]), tol);
  EXPECT_LT(rel_diff(some.logits[1], full.logits[1]), tol);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ForwardEquivalence,
                         ::testing::Values(Case{at::kFloat, 2, 1e-5}, Case{at::kFloat, 4, 1e-5},
                                           Case{at::kFloat, 1, 1e-5}, Case{at::kBFloat16, 2, 0.1},
                                           Case{at::kFloat, 2, 1e-5, CpuPath::Reference},
                                           Case{at::kFloat, 1, 1e-5, CpuPath::Reference}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const bool native = info.param.dtype == at::kFloat && info.param.path != CpuPath::Reference;
                           return std::string(info.param.dtype == at::kFloat ? "float32" : "bfloat16") + "_kv" +
                                  std::to_string(info.param.kv_heads) + (native ? "_native" : "_reference");
                         });

}  // namespace
