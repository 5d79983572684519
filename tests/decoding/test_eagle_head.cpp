// The EAGLE draft head: checkpoint layout and round trip, errors against the target, and its forward's
// invariants (tree attention == separate chains; incremental == full), each against a simpler computation.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/io/safetensors.h"
#include "strategies/eagle/eagle_head.h"
#include "model/model_fixtures.h"
#include "test_paths.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

std::string fresh_dir(const std::string& name) {
  std::string dir = temp_dir() + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A head with weights big enough that its outputs vary (std 0.02 everywhere makes every input look alike).
std::unique_ptr<EagleHead> lively_head(const LlamaModel& target, uint64_t seed) {
  auto random = EagleHead::random(target, seed);
  EagleHeadWeights w = random->weights();
  w.fc = w.fc * 20.0;
  w.fc_bias = at::linspace(-0.1, 0.1, w.fc_bias.size(0), w.fc_bias.options());
  w.layer.wqkv = w.layer.wqkv * 10.0;
  w.layer.wo = w.layer.wo * 10.0;
  w.layer.w_gate_up = w.layer.w_gate_up * 10.0;
  w.layer.w_down = w.layer.w_down * 10.0;
  return std::make_unique<EagleHead>(random->config(), w, target);
}

// n random "features" of the target's width, deterministic.
at::Tensor features_for(int64_t n, int64_t d, int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::normal(0.0, 1.0, {n, d}, gen, at::TensorOptions().dtype(at::kFloat));
}

class EagleHeadTest : public ::testing::Test {
 protected:
  std::unique_ptr<LlamaModel> target = tiny_model();
  std::unique_ptr<EagleHead> head = lively_head(*target, 5);
  const int64_t d = target->config().hidden_size;
};

TEST_F(EagleHeadTest, KeysAreThePublishedLayout) {
  // SafeAILab/EAGLE cnets1.py Model: fc (Linear 2d -> d, bias), layers[0] without input_layernorm.
  const std::vector<std::string> official{
      "fc.weight",
      "fc.bias",
      "layers.0.self_attn.q_proj.weight",
      "layers.0.self_attn.k_proj.weight",
      "layers.0.self_attn.v_proj.weight",
      "layers.0.self_attn.o_proj.weight",
      "layers.0.post_attention_layernorm.weight",
      "layers.0.mlp.gate_proj.weight",
      "layers.0.mlp.up_proj.weight",
      "layers.0.mlp.down_proj.weight",
  };
  EXPECT_EQ(EagleHead::checkpoint_keys(), official);
  auto no_bias = EagleHead::checkpoint_keys(false);
  EXPECT_EQ(std::count(no_bias.begin(), no_bias.end(), "fc.bias"), 0);

  const std::string dir = fresh_dir("keys");
  head->save(dir);
  SafetensorsFile file(dir + "/model.safetensors");
  std::set<std::string> names;
  for (const auto& t : file.tensors()) names.insert(t.name);
  EXPECT_EQ(names, std::set<std::string>(official.begin(), official.end()));
  EXPECT_EQ(file.find("fc.weight")->shape, (std::vector<int64_t>{d, 2 * d}));

  auto config = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  EXPECT_EQ(config["num_hidden_layers"], 1);
  EXPECT_EQ(config["hidden_size"], d);
  EXPECT_EQ(config["vocab_size"], target->config().vocab_size);
  EXPECT_EQ(config["draftlab_eagle_input"], "feature_shifted_token");
  EXPECT_EQ(config["bias"], true);
}

TEST_F(EagleHeadTest, SaveLoadRoundTripIsBitwise) {
  const std::string dir = fresh_dir("roundtrip");
  head->save(dir);
  auto loaded = EagleHead::load(dir, *target);
  auto from_file = EagleHead::load(dir + "/model.safetensors", *target);
  EXPECT_EQ(loaded->input_variant(), "feature_shifted_token");
  EXPECT_EQ(loaded->num_parameters(), head->num_parameters());

  auto tokens = long_tensor({5, 17, 3, 96, 40, 2});
  auto feats = features_for(6, d, 1);
  auto pos = long_tensor({0, 1, 2, 3, 4, 5});
  KvCache c1 = head->make_cache(16), c2 = loaded->make_cache(16), c3 = from_file->make_cache(16);
  auto a = head->forward(c1, tokens, feats, pos);
  auto b = loaded->forward(c2, tokens, feats, pos);
  auto c = from_file->forward(c3, tokens, feats, pos);
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_TRUE(at::equal(a, c));
  EXPECT_TRUE(at::equal(head->logits(a), loaded->logits(b)));
  EXPECT_GT(a.std().item<double>(), 0.1) << "outputs should vary, or the comparison proves little";
}

TEST_F(EagleHeadTest, RandomHeadIsSeededAndShapedLikeTheTarget) {
  auto a = EagleHead::random(*target, 3), b = EagleHead::random(*target, 3), c = EagleHead::random(*target, 4);
  EXPECT_TRUE(at::equal(a->weights().fc, b->weights().fc));
  EXPECT_FALSE(at::equal(a->weights().fc, c->weights().fc));
  EXPECT_EQ(a->config().intermediate_size, target->config().intermediate_size);
  EXPECT_EQ(a->config().num_hidden_layers, 1);
  EXPECT_TRUE(at::equal(a->weights().fc_bias, at::zeros_like(a->weights().fc_bias)));
  EXPECT_NEAR(a->weights().fc.std().item<double>(), 0.02, 0.002);
}

TEST_F(EagleHeadTest, OutputIsLmHeadOfTheDecoderLayerOverFc) {
  // The architecture spelled out with plain ops: fc(cat(embed, feature)) + bias -> one layer without input norm.
  auto tokens = long_tensor({7});
  auto feats = features_for(1, d, 2);
  const auto& w = head->weights();
  auto x = at::linear(at::cat({at::embedding(target->weights().embed, tokens), feats}, 1), w.fc, w.fc_bias);
  // A single token at position 0 attends only to itself: attention output = v projected by o.
  const auto& c = head->config();
  const int64_t H = c.num_attention_heads, KVH = c.num_key_value_heads, hd = c.head_dim;
  auto v = at::linear(x, w.layer.wqkv.narrow(0, (H + KVH) * hd, KVH * hd)).view({KVH, hd});
  auto attn = v.repeat_interleave(H / KVH, 0).reshape({1, H * hd});
  auto h = x + at::linear(attn, w.layer.wo);
  auto hn = h * at::rsqrt(h.pow(2).mean(-1, true) + c.rms_norm_eps) * w.layer.mlp_norm;
  auto gu = at::linear(hn, w.layer.w_gate_up);
  const int64_t I = c.intermediate_size;
  auto ref = h + at::linear(at::silu(gu.narrow(1, 0, I)) * gu.narrow(1, I, I), w.layer.w_down);

  KvCache cache = head->make_cache(4);
  auto out = head->forward(cache, tokens, feats, long_tensor({0}));
  EXPECT_LT(rel_diff(out, ref), 1e-5);
  EXPECT_LT(rel_diff(head->logits(out), at::linear(ref, target->weights().lm_head)), 1e-5);
  EXPECT_NEAR(head->probabilities(out).sum().item<double>(), 1.0, 1e-5);
}

TEST_F(EagleHeadTest, IncrementalEqualsFullSequence) {
  auto tokens = long_tensor({5, 17, 3, 96, 40, 2, 11, 12});
  auto feats = features_for(8, d, 3);
  KvCache full_cache = head->make_cache(16);
  auto full = head->forward(full_cache, tokens, feats, at::arange(8, at::kLong));
  KvCache inc = head->make_cache(16);
  for (int64_t i = 0; i < 8; ++i) {
    auto out = head->forward(inc, tokens.narrow(0, i, 1), feats.narrow(0, i, 1), long_tensor({i}));
    EXPECT_LT(rel_diff(out[0], full[i]), 1e-5) << "row " << i;
  }
}

// A branching set of draft pairs after a committed prefix; flat order has parents first.
//        a(0)        e(1)
//       /    \         |
//     b(2)   c(3)    f(5)
//      |
//     d(4)
struct PairTree {
  std::vector<int64_t> tokens{40, 41, 42, 43, 44, 45};
  std::vector<int64_t> parent{-1, -1, 0, 0, 2, 1};
  int64_t depth(int64_t i) const { return parent[i] < 0 ? 1 : depth(parent[i]) + 1; }
  std::vector<int64_t> path_to(int64_t i) const {
    std::vector<int64_t> p;
    for (int64_t j = i; j >= 0; j = parent[j]) p.insert(p.begin(), j);
    return p;
  }
  at::Tensor ancestor_mask() const {
    const auto n = static_cast<int64_t>(tokens.size());
    auto m = at::zeros({n, n}, at::kBool);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j >= 0; j = parent[j]) m[i][j] = true;
    return m;
  }
};

TEST_F(EagleHeadTest, TreeMaskedForwardEqualsSeparateChains) {
  const int64_t P = 5;
  auto prefix_tokens = long_tensor({9, 8, 7, 6, 5});
  auto prefix_feats = features_for(P, d, 4);
  PairTree tree;
  const auto n = static_cast<int64_t>(tree.tokens.size());
  auto node_feats = features_for(n, d, 5);  // each node's input feature (its parent's prediction, in drafting)
  std::vector<int64_t> pos;
  for (int64_t i = 0; i < n; ++i) pos.push_back(P - 1 + tree.depth(i));

  // All nodes in one call under an ancestor mask.
  KvCache cache = head->make_cache(32);
  head->forward(cache, prefix_tokens, prefix_feats, at::arange(P, at::kLong));
  auto tree_out = head->forward(cache, long_tensor(tree.tokens), node_feats, long_tensor(pos), tree.ancestor_mask());

  // Layer by layer with forward_visible, draft rows of earlier layers in the cache (what EagleDrafter does).
  KvCache layered = head->make_cache(32);
  head->forward(layered, prefix_tokens, prefix_feats, at::arange(P, at::kLong));
  std::vector<int64_t> row(n, -1);
  at::Tensor layer_out = at::zeros({n, d});
  for (int64_t depth = 1; depth <= 3; ++depth) {
    std::vector<int64_t> nodes;
    for (int64_t i = 0; i < n; ++i)
      if (tree.depth(i) == depth) nodes.push_back(i);
    const auto m = static_cast<int64_t>(nodes.size());
    const int64_t start = layered.length(), T = start + m;
    auto visible = at::zeros({m, T}, at::kBool);
    for (int64_t j = 0; j < m; ++j) {
      visible[j].narrow(0, 0, P).fill_(true);
      for (int64_t a = tree.parent[nodes[j]]; a >= 0; a = tree.parent[a]) visible[j][row[a]] = true;
      visible[j][start + j] = true;
    }
    std::vector<int64_t> toks, ps;
    for (int64_t i : nodes) toks.push_back(tree.tokens[i]), ps.push_back(pos[i]);
    auto idx = long_tensor(nodes);
    auto out = head->forward_visible(layered, long_tensor(toks), node_feats.index_select(0, idx), long_tensor(ps), visible);
    for (int64_t j = 0; j < m; ++j) {
      row[nodes[j]] = start + j;
      layer_out[nodes[j]] = out[j];
    }
  }

  for (int64_t i = 0; i < n; ++i) {
    KvCache chain = head->make_cache(32);
    auto path = tree.path_to(i);
    std::vector<int64_t> toks{9, 8, 7, 6, 5};
    std::vector<at::Tensor> feats{prefix_feats};
    for (int64_t j : path) toks.push_back(tree.tokens[j]), feats.push_back(node_feats[j].unsqueeze(0));
    const auto len = static_cast<int64_t>(toks.size());
    auto ref = head->forward(chain, long_tensor(toks), at::cat(feats, 0), at::arange(len, at::kLong));
    EXPECT_LT(rel_diff(tree_out[i], ref[len - 1]), 1e-5) << "node " << i;
    EXPECT_LT(rel_diff(layer_out[i], ref[len - 1]), 1e-5) << "node " << i << " (layered)";
  }
}

TEST_F(EagleHeadTest, MismatchedTargetIsAClearError) {
  // A head trained for another model: hidden size 32 instead of the target's 64.
  ModelConfig small = tiny_config();
  small.hidden_size = 32;
  small.num_attention_heads = 2;
  small.num_key_value_heads = 1;
  LlamaModel other(small, random_llama_weights(small, 1, ComputeOptions{}), ComputeOptions{});
  const std::string dir = fresh_dir("other_hidden");
  EagleHead::random(other, 0)->save(dir);
  const std::string msg = error_of([&] { EagleHead::load(dir, *target); });
  EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;
  EXPECT_NE(msg.find("64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("32"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir + "/config.json"), std::string::npos) << msg;

  ModelConfig bigger_vocab = tiny_config();
  bigger_vocab.vocab_size = 120;
  LlamaModel other2(bigger_vocab, random_llama_weights(bigger_vocab, 1, ComputeOptions{}), ComputeOptions{});
  const std::string dir2 = fresh_dir("other_vocab");
  EagleHead::random(other2, 0)->save(dir2);
  const std::string msg2 = error_of([&] { EagleHead::load(dir2, *target); });
  EXPECT_NE(msg2.find("vocab_size"), std::string::npos) << msg2;
  EXPECT_NE(msg2.find("97"), std::string::npos) << msg2;
  EXPECT_NE(msg2.find("120"), std::string::npos) << msg2;
}

// Rewrites a saved head's tensors with some added or removed, to check what load() accepts.
void rewrite(const std::string& dir, const std::vector<std::string>& drop,
             const std::vector<std::pair<std::string, at::Tensor>>& add) {
  SafetensorsFile in(dir + "/model.safetensors");
  std::vector<std::pair<std::string, at::Tensor>> keep;
  for (const auto& t : in.tensors()) {
    if (std::find(drop.begin(), drop.end(), t.name) != drop.end()) continue;
    auto copy = at::empty(t.shape, at::kFloat);
    std::memcpy(copy.data_ptr(), t.data, t.nbytes);
    keep.emplace_back(t.name, copy);
  }
  for (const auto& a : add) keep.push_back(a);
  std::vector<TensorToWrite> entries;
  for (const auto& [name, t] : keep)
    entries.push_back({name, DType::F32, t.sizes().vec(), t.data_ptr(), static_cast<size_t>(t.nbytes())});
  write_safetensors(dir + "/model.safetensors", entries);
}

TEST_F(EagleHeadTest, PublishedExtrasAreIgnoredOtherKeysRefused) {
  const int64_t V = target->config().vocab_size;
  // embed_tokens.weight (the official Model saves the target's embedding) and a rotary buffer: ignored.
  const std::string ok = fresh_dir("extras");
  head->save(ok);
  rewrite(ok, {}, {{"embed_tokens.weight", at::zeros({V, d})},
                   {"layers.0.self_attn.rotary_emb.inv_freq", at::ones({8})}});
  auto loaded = EagleHead::load(ok, *target);
  EXPECT_TRUE(at::equal(loaded->weights().fc, head->weights().fc));

  // An input norm is a different architecture: refused, naming the key.
  const std::string norm = fresh_dir("input_norm");
  head->save(norm);
  rewrite(norm, {}, {{"layers.0.input_layernorm.weight", at::ones({d})}});
  EXPECT_NE(error_of([&] { EagleHead::load(norm, *target); }).find("layers.0.input_layernorm.weight"),
            std::string::npos);

  // An unknown tensor (say an EAGLE-3 head's) and a missing one.
  const std::string unknown = fresh_dir("unknown");
  head->save(unknown);
  rewrite(unknown, {}, {{"midlayer.hidden_norm.weight", at::ones({d})}});
  EXPECT_NE(error_of([&] { EagleHead::load(unknown, *target); }).find("midlayer.hidden_norm.weight"),
            std::string::npos);
  const std::string missing = fresh_dir("missing");
  head->save(missing);
  rewrite(missing, {"layers.0.mlp.up_proj.weight"}, {});
  EXPECT_NE(error_of([&] { EagleHead::load(missing, *target); }).find("layers.0.mlp.up_proj.weight"),
            std::string::npos);

  // "bias": false in config.json (as the official loader reads it): no fc.bias, and it round-trips.
  const std::string nobias = fresh_dir("nobias");
  head->save(nobias);
  rewrite(nobias, {"fc.bias"}, {});
  auto config = nlohmann::json::parse(std::ifstream(nobias + "/config.json"));
  config["bias"] = false;
  std::ofstream(nobias + "/config.json") << config.dump();
  auto unbiased = EagleHead::load(nobias, *target);
  EXPECT_FALSE(unbiased->weights().fc_bias.defined());
  const std::string again = fresh_dir("nobias_again");
  unbiased->save(again);
  SafetensorsFile file(again + "/model.safetensors");
  EXPECT_EQ(file.find("fc.bias"), nullptr);

  // A wrong shape names the tensor and both shapes.
  const std::string shape = fresh_dir("shape");
  head->save(shape);
  rewrite(shape, {"fc.weight"}, {{"fc.weight", at::zeros({d, 3 * d})}});
  const std::string msg = error_of([&] { EagleHead::load(shape, *target); });
  EXPECT_NE(msg.find("fc.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[64, 128]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[64, 192]"), std::string::npos) << msg;

  // An unknown input variant.
  const std::string variant = fresh_dir("variant");
  head->save(variant);
  auto vc = nlohmann::json::parse(std::ifstream(variant + "/config.json"));
  vc["draftlab_eagle_input"] = "hidden_states_only";
  std::ofstream(variant + "/config.json") << vc.dump();
  EXPECT_NE(error_of([&] { EagleHead::load(variant, *target); }).find("draftlab_eagle_input"), std::string::npos);
}

TEST_F(EagleHeadTest, ForwardInputErrors) {
  KvCache cache = head->make_cache(4);
  auto feats = features_for(2, d, 9);
  EXPECT_THROW(head->forward(cache, long_tensor({1, 200}), feats, long_tensor({0, 1})), Error);  // vocabulary
  EXPECT_THROW(head->forward(cache, long_tensor({1, 2}), feats.narrow(1, 0, 10), long_tensor({0, 1})), Error);
  EXPECT_THROW(head->forward(cache, long_tensor({1, 2}), feats, long_tensor({0})), Error);
  EXPECT_THROW(head->forward(cache, long_tensor({1, 2, 3, 4, 5}), features_for(5, d, 1), at::arange(5, at::kLong)),
               Error);  // cache full
  EXPECT_THROW(head->forward_visible(cache, long_tensor({1, 2}), feats, long_tensor({0, 1}), at::ones({2, 3}, at::kBool)),
               Error);
  EXPECT_EQ(cache.length(), 0);
}

TEST(EagleHeadBfloat16, RunsInTheTargetsDtype) {
  auto target = tiny_model(at::kBFloat16);
  auto head = EagleHead::random(*target, 1);
  EXPECT_EQ(head->weights().fc.scalar_type(), at::kBFloat16);
  KvCache cache = head->make_cache(8);
  auto out = head->forward(cache, long_tensor({3, 4}), features_for(2, 64, 1), long_tensor({0, 1}));
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  EXPECT_EQ(head->logits(out).scalar_type(), at::kFloat);
}

}  // namespace
