// Hydra heads: the logits against a plain double-precision computation of the official grounded MLP head
// (R x + r + SiLU(W x + b), further ResBlocks, LM head) with x = [f, E(t_1) .. E(t_{k+1})], the folder written by
// save() loading back bit for bit (and under the "hydra_head." prefix), load errors naming file, field or tensor,
// and the strategy's tree: every node holds the ranked token of the head of its depth run on its parent's path.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/io/safetensors.h"
#include "strategies/head_family.h"
#include "strategies/hydra/hydra_heads.h"
#include "model_fixtures.h"
#include "strategies/parallel_heads/parallel_heads.h"
#include "strategies/registry.h"
#include "test_errors.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using testing::expect_error;

using testing::fresh_dir;

std::vector<double> doubles(const at::Tensor& t) {
  auto c = t.detach().to(at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// y = W x + b, one scalar at a time (W [out, in] row-major).
std::vector<double> affine(const HydraHeadWeights::Linear& l, const std::vector<double>& x) {
  const auto W = doubles(l.weight), b = doubles(l.bias);
  std::vector<double> y(b);
  const size_t in = x.size();
  for (size_t o = 0; o < y.size(); ++o)
    for (size_t i = 0; i < in; ++i) y[o] += W[o * in + i] * x[i];
  return y;
}

double silu(double s) { return s / (1.0 + std::exp(-s)); }

std::vector<double> naive_logits(const HydraHeads& heads, const LlamaModel& target, int64_t k, const at::Tensor& f,
                                 const std::vector<int64_t>& tokens) {
  std::vector<double> x = doubles(f);
  const auto E = doubles(target.weights().embed);
  const int64_t d = target.config().hidden_size;
  for (int64_t t : tokens) x.insert(x.end(), E.begin() + t * d, E.begin() + (t + 1) * d);
  const auto& head = heads.weights().heads[static_cast<size_t>(k)];
  std::vector<double> h = affine(head.residual, x);
  const auto a = affine(head.input, x);
  for (size_t i = 0; i < h.size(); ++i) h[i] += silu(a[i]);
  for (const auto& b : head.blocks) {
    const auto y = affine(b, h);
    for (size_t i = 0; i < h.size(); ++i) h[i] += silu(y[i]);
  }
  if (head.lm_head.weight.defined()) return affine(head.lm_head, h);
  const auto L = doubles(target.weights().lm_head);
  std::vector<double> out(static_cast<size_t>(target.config().vocab_size), 0.0);
  for (size_t v = 0; v < out.size(); ++v)
    for (int64_t i = 0; i < d; ++i) out[v] += L[v * d + i] * h[i];
  return out;
}

HydraConfig config(int64_t heads, int64_t layers, bool own) {
  HydraConfig c;
  c.num_heads = heads;
  c.num_layers = layers;
  c.own_lm_head = own;
  return c;
}

TEST(HydraHeads, LogitsMatchAPlainComputationOfTheGroundedHead) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const auto f = at::randn({64}, gen, at::TensorOptions().dtype(at::kFloat));
  for (bool own : {false, true}) {
    SCOPED_TRACE(own ? "own LM heads" : "shared LM head");
    auto target = testing::tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Reference);
    // weight_std 0.3: blocks far from zero, so a wrong order, a missing bias or a swapped token shows.
    const auto heads = HydraHeads::random(*target, 5, config(3, 2, own), 0.3);
    for (int64_t k = 0; k < 3; ++k) {
      std::vector<int64_t> paths;  // two rows: 3, 4, ... and 90, 89, ...
      for (int64_t j = 0; j <= k; ++j) paths.push_back(3 + j);
      for (int64_t j = 0; j <= k; ++j) paths.push_back(90 - j);
      const at::Tensor got = heads->logits(f, k, paths);
      ASSERT_EQ(got.sizes().vec(), (std::vector<int64_t>{2, 97}));
      for (int64_t row = 0; row < 2; ++row) {
        const std::vector<int64_t> tokens(paths.begin() + row * (k + 1), paths.begin() + (row + 1) * (k + 1));
        const auto want = naive_logits(*heads, *target, k, f, tokens);
        for (int64_t v = 0; v < 97; ++v)
          ASSERT_NEAR(got[row][v].item<double>(), want[v], 1e-4 * (1 + std::abs(want[v]))) << "head " << k << " row " << row;
      }
    }
    // The tokens matter (Medusa's heads would give both rows the same logits).
    EXPECT_FALSE(at::allclose(heads->logits(f, 1, {3, 4}), heads->logits(f, 1, {3, 5})));
    expect_error([&] { heads->logits(f, 1, {3}); }, {"paths of 2 tokens"});
    expect_error([&] { heads->logits(f, 0, {97}); }, {"token 97", "vocabulary of 97"});
    expect_error([&] { heads->logits(f, 3, {1, 2, 3, 4}); }, {"head 3 of 3"});
  }
}

TEST(HydraHeads, TrainingStartIsTheFeaturePassedThrough) {
  auto target = testing::tiny_model();
  const auto heads = HydraHeads::random(*target, 1, config(2, 2, false), 0.0);
  const auto& h = heads->weights().heads[1];
  EXPECT_TRUE(at::equal(h.input.weight, at::zeros_like(h.input.weight)));
  EXPECT_TRUE(at::equal(h.residual.weight.narrow(1, 0, 64), at::eye(64)));
  EXPECT_TRUE(at::equal(h.blocks[0].weight, at::zeros_like(h.blocks[0].weight)));
  EXPECT_EQ(heads->num_parameters(), 2 * (64 * 64 + 64) + (64 * 128 + 64) * 2 + (64 * 192 + 64) * 2);
}

TEST(HydraHeads, SavedFolderLoadsBitForBitAlsoUnderTheModelPrefix) {
  auto target = testing::tiny_model();
  const auto f = at::randn({64});
  for (bool own : {false, true}) {
    const auto heads = HydraHeads::random(*target, 9, config(3, 2, own), 0.2);
    const std::string dir = fresh_dir(own ? "hydra_saved_own" : "hydra_saved_shared");
    heads->save(dir);
    EXPECT_EQ(head_family_of(dir).name, "hydra");
    const auto loaded = HydraHeads::load(dir, *target);
    EXPECT_EQ(loaded->config().own_lm_head, own);
    for (int64_t k = 0; k < 3; ++k) {
      const std::vector<int64_t> path(static_cast<size_t>(k + 1), 11);
      EXPECT_TRUE(at::equal(loaded->logits(f, k, path), heads->logits(f, k, path))) << "head " << k;
    }
    // The same tensors under the model attribute's prefix, in the official file name.
    SafetensorsFile file(dir + "/model.safetensors");
    std::vector<TensorToWrite> entries;
    for (const TensorEntry& e : file.tensors()) entries.push_back({"hydra_head." + e.name, e.dtype, e.shape, e.data, e.nbytes});
    const std::string prefixed = fresh_dir("hydra_prefixed");
    write_safetensors(prefixed + "/hydra_lm_head.safetensors", entries, {});
    std::filesystem::copy_file(dir + "/config.json", prefixed + "/config.json");
    EXPECT_TRUE(at::equal(HydraHeads::load(prefixed, *target)->logits(f, 2, {1, 2, 3}), heads->logits(f, 2, {1, 2, 3})));
  }
}

TEST(HydraHeads, LoadErrorsNameFileFieldAndTensor) {
  auto target = testing::tiny_model();
  const std::string dir = fresh_dir("hydra_errors");
  HydraHeads::random(*target, 2, config(2, 1, false), 0.1)->save(dir);
  const std::string good = [&] {
    std::ifstream in(dir + "/config.json");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  auto with_config = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    std::ofstream(dir + "/config.json") << text;
  };
  with_config("\"hydra_num_heads\": 2", "\"hydra_num_heads\": 3");
  expect_error([&] { HydraHeads::load(dir, *target); }, {dir + "/model.safetensors", "hydra_mlp.2.0.linear.weight", "not found", "[64, 256]"});
  with_config("\"hydra_num_heads\": 2", "\"hydra_num_heads\": 1");
  expect_error([&] { HydraHeads::load(dir, *target); }, {dir + "/model.safetensors", "unexpected tensor", "hydra_mlp.1"});
  with_config("\"hydra_num_layers\": 1", "\"hydra_num_layers\": 0");
  expect_error([&] { HydraHeads::load(dir, *target); }, {dir + "/config.json", "hydra_num_layers", "an integer >= 1"});
  with_config("\"hidden_size\": 64", "\"hidden_size\": 128");
  expect_error([&] { HydraHeads::load(dir, *target); }, {dir + "/config.json", "hidden_size", "64", "128"});
  with_config("\"mlp\"", "\"prefix-mlp\"");
  expect_error([&] { HydraHeads::load(dir, *target); }, {dir + "/config.json", "hydra_head_arch", "prefix-mlp"});
  with_config("\"grounded_heads\": true", "\"grounded_heads\": false");
  expect_error([&] { HydraHeads::load(dir, *target); }, {dir + "/config.json", "grounded_heads", "not supported", "train-head --kind hydra"});
  with_config("\"grounded_heads\": true", "\"grounded_heads\": true, \"hidden_state_offset\": 1");
  expect_error([&] { HydraHeads::load(dir, *target); }, {dir + "/config.json", "hidden_state_offset", "0", "1"});
  with_config("\"grounded_heads\": true", "\"grounded_heads\": true, \"hidden_state_offset\": 0");
  EXPECT_NO_THROW(HydraHeads::load(dir, *target));
  with_config("\"draftlab_lm_head\": \"shared\"", "\"draftlab_lm_head\": \"own\"");
  expect_error([&] { HydraHeads::load(dir, *target); }, {"hydra_lm_head.0.weight", "not found", "draftlab_lm_head"});
  with_config("\"hydra_num_heads\": 2", "\"hydra_num_heads\": 2");
  // A truncated weights file, a folder without weights, a path that does not exist.
  std::filesystem::resize_file(dir + "/model.safetensors", 100);
  expect_error([&] { HydraHeads::load(dir, *target); }, {dir + "/model.safetensors"});
  std::filesystem::remove(dir + "/model.safetensors");
  expect_error([&] { HydraHeads::load(dir, *target); }, {dir, "model.safetensors or hydra_lm_head.safetensors"});
  expect_error([&] { HydraHeads::load(testing::temp_dir() + "/no_hydra_here", *target); }, {"no_hydra_here", "not found"});
}

// The path of sibling ranks of node i, read off the tree.
std::vector<int32_t> ranks_of(const DraftTree& tree, int32_t i) {
  std::vector<int32_t> p;
  for (; i >= 0; i = tree.node(i).parent) p.insert(p.begin(), tree.node(i).sibling_rank);
  return p;
}

TEST(HydraStrategy, EachNodeHoldsTheRankedTokenOfItsDepthsHeadOnItsParentsPath) {
  auto target = testing::tiny_model();
  const std::string dir = fresh_dir("hydra_strategy_heads");
  const auto heads = HydraHeads::random(*target, 21, config(4, 1, false), 0.3);
  heads->save(dir);
  for (const std::vector<std::string>& options :
       {std::vector<std::string>{"head=" + dir}, std::vector<std::string>{"head=" + dir, "tree=cartesian", "top_k=3"}}) {
    const auto strategy = make_strategy("hydra", StrategyContext{*target}, StrategyOptions::parse(options));
    const TreeSpec spec = options.size() == 1 ? load_tree_spec(resolve_tree_path("medusa_mc_sim_7b_63")) : cartesian_tree(3, 4);
    std::vector<int64_t> prompt{1, 5, 9, 2};
    KvCache cache = target->make_cache(32);
    const auto out = target->forward_chain(cache, prompt);
    strategy->begin(prompt, out.features, 7);
    prompt.push_back(7);
    Sampler sampler(SamplingParams{});
    const DraftTree tree = propose_one(*strategy, DraftRequest{prompt, 1000, 100, sampler});
    ASSERT_EQ(tree.size(), spec.size());
    const at::Tensor f = out.features[3];
    for (int32_t i = 0; i < tree.size(); ++i) {
      ASSERT_EQ(ranks_of(tree, i), spec.paths[i]) << "node " << i;
      std::vector<int64_t> path{7};  // the root, then the parent's path
      std::vector<int32_t> chain;
      for (int32_t p = tree.node(i).parent; p >= 0; p = tree.node(p).parent) chain.insert(chain.begin(), p);
      for (int32_t p : chain) path.push_back(tree.node(p).token);
      const int64_t k = static_cast<int64_t>(path.size()) - 1;
      const at::Tensor row = heads->logits(f, k, path)[0];
      const int64_t token = tree.node(i).token;
      const int64_t better = row.gt(row[token]).sum().item<int64_t>() +
                             row.eq(row[token]).narrow(0, 0, token).sum().item<int64_t>();
      EXPECT_EQ(better, spec.paths[i].back()) << "node " << i;
      EXPECT_NEAR(tree.node(i).confidence, at::softmax(row.to(at::kDouble), 0)[token].item<double>(), 1e-5);
    }
    // Cut to the request: two tokens wanted, five rows of room.
    const DraftTree small = propose_one(*strategy, DraftRequest{prompt, 5, 2, sampler});
    EXPECT_EQ(small.size(), 5);
    EXPECT_LE(small.max_depth(), 2);
  }
  expect_error([&] { make_strategy("hydra", StrategyContext{*target}, StrategyOptions::parse({"head=" + dir, "heads=2"})); },
               {"heads", "head=" + dir});
}

}  // namespace
}  // namespace draftlab
