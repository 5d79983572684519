// The EAGLE-3 head: its forward against the specification written out with plain ops (no cache, no fused weights),
// on both CPU paths; tree attention against separate chains; the official checkpoint layout, its round trip and a
// head written by an independent Python writer (when python3-torch is installed); every load error; and the
// decoders handing a strategy the target features it asks for.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/decoding/speculative_decoder.h"
#include "core/io/safetensors.h"
#include "strategies/eagle3/draft_to_target.h"
#include "strategies/eagle3/eagle3_head.h"
#include "strategies/head_family.h"
#include "core/model/torch_checkpoint.h"
#include "model/model_fixtures.h"
#include "strategies/registry.h"
#include "test_errors.h"
#include "test_paths.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

// Rewrites a safetensors file with some tensors dropped and others added (dtypes kept).
void rewrite_tensors(const std::string& path, const std::vector<std::string>& drop,
                     const std::vector<std::pair<std::string, at::Tensor>>& add) {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<TensorToWrite> entries;
  {
    SafetensorsFile in(path);
    for (const auto& t : in.tensors()) {
      if (std::find(drop.begin(), drop.end(), t.name) != drop.end()) continue;
      bytes.emplace_back(t.data, t.data + t.nbytes);
      entries.push_back({t.name, t.dtype, t.shape, nullptr, t.nbytes});
    }
  }
  for (size_t i = 0; i < bytes.size(); ++i) entries[i].data = bytes[i].data();
  std::vector<at::Tensor> kept;
  for (const auto& [name, t] : add) {
    kept.push_back(t.contiguous());
    const DType dtype = t.scalar_type() == at::kLong ? DType::I64 : t.scalar_type() == at::kBool ? DType::BOOL : DType::F32;
    entries.push_back({name, dtype, t.sizes().vec(), kept.back().data_ptr(), static_cast<size_t>(t.nbytes())});
  }
  write_safetensors(path, entries);
}

at::Tensor normal(std::vector<int64_t> shape, double std, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::normal(0.0, std, shape, gen, at::TensorOptions().dtype(at::kFloat));
}

// A head whose outputs vary (std 0.02 makes every input look alike), with the two input norms different so that
// swapping them would show, and a reduced draft vocabulary.
std::unique_ptr<Eagle3Head> lively_head(const LlamaModel& target, uint64_t seed, int64_t draft_vocab = 40) {
  auto random = Eagle3Head::random(target, seed, draft_vocab);
  Eagle3HeadWeights w = random->weights();
  const int64_t d = target.config().hidden_size;
  w.fc = w.fc * 5.0;
  w.input_norm = at::linspace(0.5, 1.5, d);
  w.hidden_norm = at::linspace(1.5, 0.5, d);
  w.layer.mlp_norm = at::linspace(0.8, 1.2, d);
  w.norm = at::linspace(1.2, 0.8, d);
  w.layer.wqkv = w.layer.wqkv * 10.0;
  w.layer.wo = w.layer.wo * 10.0;
  w.layer.w_gate_up = w.layer.w_gate_up * 10.0;
  w.layer.w_down = w.layer.w_down * 10.0;
  w.lm_head = w.lm_head * 20.0;
  return std::make_unique<Eagle3Head>(random->config(), w, target, random->draft_ids(), random->input_layers());
}

// The head as spec section 6 writes it, over ALL rows at once (no cache): rows' hidden inputs are [3d] target
// features or [d] states given explicitly, visible [n, n] says which rows each row attends to. Returns the raw
// outputs [n, d].
at::Tensor spec_forward(const Eagle3Head& head, const at::Tensor& tokens, const std::vector<at::Tensor>& hidden,
                        const std::vector<int64_t>& positions, const at::Tensor& visible) {
  const Eagle3HeadWeights& w = head.weights();
  const ModelConfig& c = head.config();
  const int64_t n = tokens.size(0), d = c.hidden_size, H = c.num_attention_heads, KVH = c.num_key_value_heads;
  const int64_t hd = d / H, I = c.intermediate_size;
  const double eps = c.rms_norm_eps;
  auto rms = [&](const at::Tensor& x, const at::Tensor& g) { return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * g; };
  std::vector<at::Tensor> us;
  for (const auto& h : hidden) us.push_back(h.size(-1) == d ? h.view({1, d}) : at::linear(h.view({1, 3 * d}), w.fc));
  const auto u = at::cat(us, 0);
  const auto e = at::embedding(head.target().weights().embed, tokens);
  const auto x = at::cat({rms(e, w.input_norm), rms(u, w.hidden_norm)}, 1);  // embedding first
  const auto q = at::linear(x, w.layer.wqkv.narrow(0, 0, H * hd)).view({n, H, hd});
  const auto k = at::linear(x, w.layer.wqkv.narrow(0, H * hd, KVH * hd)).view({n, KVH, hd});
  const auto v = at::linear(x, w.layer.wqkv.narrow(0, (H + KVH) * hd, KVH * hd)).view({n, KVH, hd});
  // RoPE, half-split, theta 10000, written from the formula.
  auto rotate = [&](const at::Tensor& t) {
    auto out = t.clone();
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < hd / 2; ++i) {
        const double angle = positions[r] * std::pow(10000.0, -2.0 * i / hd);
        const auto a = t.select(0, r).select(1, i), b = t.select(0, r).select(1, i + hd / 2);
        out.select(0, r).select(1, i).copy_(a * std::cos(angle) - b * std::sin(angle));
        out.select(0, r).select(1, i + hd / 2).copy_(b * std::cos(angle) + a * std::sin(angle));
      }
    return out;
  };
  const auto qr = rotate(q), kr = rotate(k);
  auto attn = at::zeros({n, H * hd});
  for (int64_t h = 0; h < H; ++h) {
    const int64_t g = h / (H / KVH);
    auto scores = at::matmul(qr.select(1, h), kr.select(1, g).t()) / std::sqrt(static_cast<double>(hd));
    scores = scores.masked_fill(visible.logical_not(), -INFINITY);
    attn.narrow(1, h * hd, hd).copy_(at::matmul(at::softmax(scores, -1), v.select(1, g)));
  }
  const auto y = u + at::linear(attn, w.layer.wo);  // the residual is the raw u
  const auto gu = at::linear(rms(y, w.layer.mlp_norm), w.layer.w_gate_up);
  return y + at::linear(at::silu(gu.narrow(1, 0, I)) * gu.narrow(1, I, I), w.layer.w_down);
}

at::Tensor spec_draft_logits(const Eagle3Head& head, const at::Tensor& states) {
  const auto& w = head.weights();
  const double eps = head.config().rms_norm_eps;
  return at::linear(states * at::rsqrt(states.pow(2).mean(-1, true) + eps) * w.norm, w.lm_head);
}

class Eagle3HeadTest : public ::testing::TestWithParam<CpuPath> {
 protected:
  std::unique_ptr<LlamaModel> target = tiny_model(at::kFloat, 2, 7, false, 97, GetParam());
  std::unique_ptr<Eagle3Head> head = lively_head(*target, 5);
  const int64_t d = target->config().hidden_size;
};

TEST_P(Eagle3HeadTest, ForwardIsTheSpecWrittenWithPlainOps) {
  // Four committed pairs (target features), then a chain of two draft rows fed back their parents' raw outputs,
  // then two siblings under the first draft row (tree attention), each seeing only its own ancestors.
  const int64_t P = 4;
  const auto G = normal({P, 3 * d}, 1.0, 11);
  const auto pair_tokens = long_tensor({5, 17, 3, 60});
  KvCache cache = head->make_cache(16);
  const auto pairs = head->forward(cache, pair_tokens, G, at::arange(P, at::kLong));
  const auto first = head->forward(cache, long_tensor({8}), pairs.narrow(0, P - 1, 1), long_tensor({P}));
  auto visible = at::ones({2, P + 3}, at::kBool);
  visible.narrow(1, P + 1, 2).fill_(false);
  visible[0][P + 1] = true;
  visible[1][P + 2] = true;
  const auto siblings = head->forward_visible(cache, long_tensor({9, 10}), first.expand({2, d}),
                                              long_tensor({P + 1, P + 1}), visible);
  EXPECT_EQ(cache.length(), P + 3);

  std::vector<at::Tensor> hidden;
  for (int64_t i = 0; i < P; ++i) hidden.push_back(G[i]);
  hidden.push_back(pairs[P - 1]);
  hidden.push_back(first[0]);
  hidden.push_back(first[0]);
  auto all_visible = at::ones({P + 3, P + 3}, at::kBool).tril();
  all_visible[P + 2][P + 1] = false;  // siblings do not see each other
  const auto want = spec_forward(*head, long_tensor({5, 17, 3, 60, 8, 9, 10}), hidden, {0, 1, 2, 3, P, P + 1, P + 1},
                                 all_visible);
  const auto got = at::cat({pairs, first, siblings}, 0);
  EXPECT_LT(rel_diff(got, want), 1e-5);
  EXPECT_GT(want.std().item<double>(), 0.1) << "outputs should vary, or the comparison proves little";

  // Logits: the head's own norm and LM head over the draft vocabulary, spread over the target's at d2t's ids.
  const auto draft = head->draft_logits(got);
  EXPECT_LT(rel_diff(draft, spec_draft_logits(*head, want)), 1e-5);
  const auto full = head->logits(got);
  ASSERT_EQ(full.size(1), target->config().vocab_size);
  EXPECT_TRUE(at::equal(full.index_select(1, head->draft_ids()), draft));
  EXPECT_EQ(at::isinf(full).sum(1)[0].item<int64_t>(), target->config().vocab_size - head->draft_vocab_size());
  EXPECT_NEAR(head->probabilities(got)[0].sum().item<double>(), 1.0, 1e-5);
}

TEST_P(Eagle3HeadTest, BatchedSequencesEqualTheirOwnForwards) {
  const auto G = normal({6, 3 * d}, 1.0, 12);
  KvCache a = head->make_cache(8), b = head->make_cache(8), a2 = head->make_cache(8), b2 = head->make_cache(8);
  const auto ta = long_tensor({1, 2, 3}), tb = long_tensor({4, 5, 6});
  const auto pa = at::arange(3, at::kLong);
  const auto alone_a = head->forward(a, ta, G.narrow(0, 0, 3), pa);
  const auto alone_b = head->forward(b, tb, G.narrow(0, 3, 3), pa);
  // One sequence feeds target features, the other its own states: both kinds of rows in one call.
  const auto outs = head->forward_batch({{&a2, ta, G.narrow(0, 0, 3), pa, {}}, {&b2, tb, G.narrow(0, 3, 3), pa, {}}});
  EXPECT_TRUE(at::equal(outs[0], alone_a));
  EXPECT_TRUE(at::equal(outs[1], alone_b));
  const auto next = head->forward_batch({{&a2, long_tensor({7}), outs[0].narrow(0, 2, 1), long_tensor({3}), {}},
                                         {&b2, long_tensor({8}), G.narrow(0, 5, 1), long_tensor({3}), {}}});
  EXPECT_TRUE(at::equal(next[0], head->forward(a, long_tensor({7}), alone_a.narrow(0, 2, 1), long_tensor({3}))));
  EXPECT_TRUE(at::equal(next[1], head->forward(b, long_tensor({8}), G.narrow(0, 5, 1), long_tensor({3}))));
}

INSTANTIATE_TEST_SUITE_P(Paths, Eagle3HeadTest, ::testing::Values(CpuPath::Native, CpuPath::Reference),
                         [](const ::testing::TestParamInfo<CpuPath>& info) {
                           return std::string(info.param == CpuPath::Native ? "native" : "reference");
                         });

TEST(Eagle3Head, NativeAndReferencePathsAgree) {
  auto native = tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Native);
  auto reference = tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Reference);
  auto hn = lively_head(*native, 3), hr = lively_head(*reference, 3);
  const int64_t d = native->config().hidden_size;
  const auto G = normal({5, 3 * d}, 1.0, 13);
  KvCache cn = hn->make_cache(8), cr = hr->make_cache(8);
  const auto on = hn->forward(cn, long_tensor({3, 1, 4, 1, 5}), G, at::arange(5, at::kLong));
  const auto orf = hr->forward(cr, long_tensor({3, 1, 4, 1, 5}), G, at::arange(5, at::kLong));
  EXPECT_LT(rel_diff(on, orf), 1e-5);
  EXPECT_LT(rel_diff(hn->draft_logits(on), hr->draft_logits(orf)), 1e-5);
}

TEST(Eagle3Head, FeatureLayersFollowTheOfficialIndicesAndGuardSmallTargets) {
  EXPECT_EQ(eagle3_input_layers(32), (std::vector<int64_t>{2, 16, 29}));  // Llama-3.1-8B (spec 1.1)
  EXPECT_EQ(eagle3_input_layers(40), (std::vector<int64_t>{2, 20, 37}));  // Vicuna-13B
  EXPECT_EQ(eagle3_input_layers(16), (std::vector<int64_t>{2, 8, 13}));   // Llama-3.2-1B, ts-target
  EXPECT_EQ(eagle3_input_layers(7), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(eagle3_input_layers(6), (std::vector<int64_t>{1, 3, 5}));     // the official triple would repeat 3
  EXPECT_EQ(eagle3_input_layers(5), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(eagle3_input_layers(2), (std::vector<int64_t>{1, 1, 1}));
  auto target = tiny_model();
  auto head = Eagle3Head::random(*target, 1);
  // The input of layer l is the output of layer l - 1: ForwardOptions' index.
  EXPECT_EQ(head->target_feature_layers(), (std::vector<int64_t>{0, 0, 0}));
}

class Eagle3Checkpoint : public ::testing::Test {
 protected:
  std::unique_ptr<LlamaModel> target = tiny_model();
  std::unique_ptr<Eagle3Head> head = lively_head(*target, 5);
  const int64_t d = target->config().hidden_size, V = target->config().vocab_size;
  std::string saved(const std::string& name) {
    const std::string dir = fresh_dir(name);
    head->save(dir);
    return dir;
  }
  static nlohmann::json config_of(const std::string& dir) {
    return nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  }
  static void write_config(const std::string& dir, const nlohmann::json& j) { std::ofstream(dir + "/config.json") << j.dump(); }
};

TEST_F(Eagle3Checkpoint, KeysShapesAndConfigAreTheOfficialLayout) {
  const std::vector<std::string> official{"fc.weight",
                                          "midlayer.hidden_norm.weight",
                                          "midlayer.input_layernorm.weight",
                                          "midlayer.post_attention_layernorm.weight",
                                          "midlayer.self_attn.q_proj.weight",
                                          "midlayer.self_attn.k_proj.weight",
                                          "midlayer.self_attn.v_proj.weight",
                                          "midlayer.self_attn.o_proj.weight",
                                          "midlayer.mlp.gate_proj.weight",
                                          "midlayer.mlp.up_proj.weight",
                                          "midlayer.mlp.down_proj.weight",
                                          "norm.weight",
                                          "lm_head.weight",
                                          "d2t",
                                          "t2d"};
  EXPECT_EQ(Eagle3Head::checkpoint_keys(), official);
  const std::string dir = saved("eagle3_keys");
  SafetensorsFile file(dir + "/model.safetensors");
  std::set<std::string> names;
  for (const auto& t : file.tensors()) names.insert(t.name);
  EXPECT_EQ(names, std::set<std::string>(official.begin(), official.end()));
  const int64_t Vd = head->draft_vocab_size(), KVH = target->config().num_key_value_heads;
  EXPECT_EQ(file.find("fc.weight")->shape, (std::vector<int64_t>{d, 3 * d}));
  EXPECT_EQ(file.find("midlayer.self_attn.q_proj.weight")->shape, (std::vector<int64_t>{d, 2 * d}));
  EXPECT_EQ(file.find("midlayer.self_attn.k_proj.weight")->shape, (std::vector<int64_t>{KVH * 16, 2 * d}));
  EXPECT_EQ(file.find("lm_head.weight")->shape, (std::vector<int64_t>{Vd, d}));
  EXPECT_EQ(file.find("d2t")->dtype, DType::I64);
  EXPECT_EQ(file.find("t2d")->dtype, DType::BOOL);
  EXPECT_EQ(file.find("t2d")->shape, (std::vector<int64_t>{V}));
  // d2t holds offsets: target id = i + d2t[i].
  const auto* offsets = reinterpret_cast<const int64_t*>(file.find("d2t")->data);
  const auto ids = head->draft_ids();
  for (int64_t i = 0; i < Vd; ++i) ASSERT_EQ(i + offsets[i], ids[i].item<int64_t>()) << i;
  int64_t marked = 0;
  for (int64_t v = 0; v < V; ++v) marked += file.find("t2d")->data[v];
  EXPECT_EQ(marked, Vd);
  const auto config = config_of(dir);
  EXPECT_EQ(config["draft_vocab_size"], Vd);
  EXPECT_EQ(config["hidden_size"], d);
  EXPECT_EQ(config["vocab_size"], V);
  EXPECT_EQ(config["rope_theta"], 10000.0);
  EXPECT_EQ(head_family_of(dir).name, "eagle3");
}

TEST_F(Eagle3Checkpoint, SaveLoadRoundTrip) {
  const std::string dir = saved("eagle3_roundtrip");
  auto loaded = Eagle3Head::load(dir, *target);
  auto from_file = Eagle3Head::load(dir + "/model.safetensors", *target);
  EXPECT_EQ(loaded->num_parameters(), head->num_parameters());
  EXPECT_EQ(loaded->input_layers(), head->input_layers());
  EXPECT_TRUE(at::equal(loaded->draft_ids(), head->draft_ids()));
  const auto G = normal({4, 3 * d}, 1.0, 14);
  KvCache c1 = head->make_cache(8), c2 = loaded->make_cache(8), c3 = from_file->make_cache(8);
  const auto tokens = long_tensor({1, 2, 3, 4});
  const auto a = head->forward(c1, tokens, G, at::arange(4, at::kLong));
  EXPECT_TRUE(at::equal(a, loaded->forward(c2, tokens, G, at::arange(4, at::kLong))));
  EXPECT_TRUE(at::equal(a, from_file->forward(c3, tokens, G, at::arange(4, at::kLong))));
  EXPECT_TRUE(at::equal(head->logits(a), loaded->logits(a)));
  // float16 files (the official dtype) load within float16 rounding.
  const std::string half = fresh_dir("eagle3_half");
  head->save(half, at::kHalf);
  auto h = Eagle3Head::load(half, *target);
  KvCache c4 = h->make_cache(8);
  EXPECT_LT(rel_diff(h->forward(c4, tokens, G, at::arange(4, at::kLong)), a), 2e-2);
  // A full-vocabulary head: d2t all zeros (identity), and also loadable without d2t / t2d.
  auto full = Eagle3Head::random(*target, 2);
  const std::string fdir = fresh_dir("eagle3_full");
  full->save(fdir);
  EXPECT_FALSE(Eagle3Head::load(fdir, *target)->draft_ids().defined());
  rewrite_tensors(fdir + "/model.safetensors", {"d2t", "t2d"}, {});
  EXPECT_EQ(Eagle3Head::load(fdir, *target)->draft_vocab_size(), V);
}

TEST_F(Eagle3Checkpoint, EveryMismatchIsAClearError) {
  const std::string missing = saved("eagle3_missing");
  rewrite_tensors(missing + "/model.safetensors", {"midlayer.hidden_norm.weight"}, {});
  expect_error([&] { Eagle3Head::load(missing, *target); }, {"midlayer.hidden_norm.weight", "not found", "[64]"});

  const std::string shape = saved("eagle3_shape");
  rewrite_tensors(shape + "/model.safetensors", {"fc.weight"}, {{"fc.weight", at::zeros({d, 2 * d})}});
  expect_error([&] { Eagle3Head::load(shape, *target); }, {"fc.weight", "[64, 192]", "[64, 128]"});

  const std::string unknown = saved("eagle3_unknown");
  rewrite_tensors(unknown + "/model.safetensors", {}, {{"fc_norm.weight", at::ones({3 * d})}});
  expect_error([&] { Eagle3Head::load(unknown, *target); }, {"unexpected tensor 'fc_norm.weight'"});

  const std::string d2t_len = saved("eagle3_d2t_length");
  rewrite_tensors(d2t_len + "/model.safetensors", {"d2t"}, {{"d2t", at::zeros({7}, at::kLong)}});
  expect_error([&] { Eagle3Head::load(d2t_len, *target); }, {"d2t", "I64 [40]", "[7]"});

  const std::string d2t_range = saved("eagle3_d2t_range");
  rewrite_tensors(d2t_range + "/model.safetensors", {"d2t"}, {{"d2t", at::full({40}, 90, at::kLong)}});
  expect_error([&] { Eagle3Head::load(d2t_range, *target); }, {"d2t", "outside [0, 97)"});

  const std::string t2d = saved("eagle3_t2d");
  rewrite_tensors(t2d + "/model.safetensors", {"t2d"}, {{"t2d", at::ones({V}, at::kBool)}});
  expect_error([&] { Eagle3Head::load(t2d, *target); }, {"t2d", "d2t says out"});

  const std::string no_vd = saved("eagle3_no_vd");
  auto j = config_of(no_vd);
  j.erase("draft_vocab_size");
  j.erase("architectures");
  write_config(no_vd, j);
  expect_error([&] { Eagle3Head::load(no_vd, *target); }, {no_vd + "/config.json", "draft_vocab_size", "required"});

  const std::string width = saved("eagle3_width");
  j = config_of(width);
  j["target_hidden_size"] = 4096;
  write_config(width, j);
  expect_error([&] { Eagle3Head::load(width, *target); }, {"target_hidden_size", "64", "4096"});

  const std::string layers = saved("eagle3_layers");
  j = config_of(layers);
  j["draftlab_feature_layers"] = {1, 2, 5};
  write_config(layers, j);
  expect_error([&] { Eagle3Head::load(layers, *target); }, {"draftlab_feature_layers", "[1, 2]", "[1,2,5]"});

  ModelConfig small = tiny_config();
  small.hidden_size = 32;
  small.num_attention_heads = 2;
  small.num_key_value_heads = 1;
  LlamaModel other(small, random_llama_weights(small, 1, ComputeOptions{}), ComputeOptions{});
  const std::string other_dir = fresh_dir("eagle3_other");
  Eagle3Head::random(other, 0)->save(other_dir);
  expect_error([&] { Eagle3Head::load(other_dir, *target); }, {other_dir + "/config.json", "hidden_size", "64", "32"});

  // Each family's strategy refuses the other's folder, naming the one that runs it.
  const std::string eagle3 = saved("eagle3_strategy");
  expect_error([&] { make_strategy("eagle2", {*target}, StrategyOptions::parse({"head=" + eagle3})); },
               {"EAGLE-3 head", "-s eagle3"});
  EXPECT_NE(make_strategy("eagle3", {*target}, StrategyOptions::parse({"head=" + eagle3})), nullptr);
}

// The independent truth for the layouts: a head written by tests/model/write_eagle3_head.py, whose plain-PyTorch
// forward the loaded head must reproduce: n pairs of target features, then one draft row fed the last pair's state.
struct PythonHead {
  std::string dir;  // head/ (the folder or pytorch_model.bin), expected.json, vocab_mapping.pt (specforge31)
  at::Tensor features;
  std::vector<int64_t> tokens;
  nlohmann::json expected;
};

PythonHead write_python_head(const LlamaModel& target, const std::string& layout, const std::string& dir) {
  const ModelConfig& c = target.config();
  const int64_t d = c.hidden_size, V = c.vocab_size, n = 5;
  PythonHead h{dir, normal({n, 3 * d}, 1.0, 15), {4, 50, 7, 96, 1}, {}};
  const auto embed = target.weights().embed.to(at::kFloat).contiguous();
  std::ofstream(dir + "/embed.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(embed.data_ptr<float>()), embed.nbytes());
  nlohmann::json in{{"hidden_size", d}, {"intermediate_size", c.intermediate_size}, {"vocab_size", V},
                    {"draft_vocab_size", 30}, {"num_attention_heads", c.num_attention_heads},
                    {"num_key_value_heads", c.num_key_value_heads}, {"rms_norm_eps", c.rms_norm_eps},
                    {"seed", 3}, {"tokens", h.tokens}, {"draft_token", 12}, {"layout", layout},
                    {"aux_layer_ids", {1, 0, 1}},
                    {"features", std::vector<float>(h.features.data_ptr<float>(),
                                                    h.features.data_ptr<float>() + h.features.numel())}};
  std::ofstream(dir + "/inputs.json") << in.dump();
  const std::string cmd = "/usr/bin/python3 " + source_path("tests/model/write_eagle3_head.py") + " " + dir;
  if (std::system(cmd.c_str()) != 0) throw Error("failed: " + cmd);
  h.expected = nlohmann::json::parse(std::ifstream(dir + "/expected.json"));
  return h;
}

// The loaded head's draft logits and their argmax target ids against Python's.
void expect_python_logits(const Eagle3Head& head, const PythonHead& py, double tolerance) {
  const auto n = static_cast<int64_t>(py.tokens.size());
  KvCache cache = head.make_cache(8);
  const auto pairs = head.forward(cache, long_tensor(py.tokens), py.features, at::arange(n, at::kLong));
  const auto draft = head.forward(cache, long_tensor({12}), pairs.narrow(0, n - 1, 1), long_tensor({n}));
  const auto states = at::cat({pairs, draft}, 0);
  const auto want = at::tensor(py.expected["draft_logits"].get<std::vector<float>>()).view({n + 1, 30});
  EXPECT_LT(rel_diff(head.draft_logits(states), want), tolerance);
  // Through d2t: the argmax of the spread logits is the target id Python mapped.
  const auto top = head.logits(states).argmax(1);
  const auto ids = py.expected["argmax_target_ids"].get<std::vector<int64_t>>();
  for (int64_t r = 0; r <= n; ++r) EXPECT_EQ(top[r].item<int64_t>(), ids[r]) << "row " << r;
}

bool python_has_torch() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

TEST(Eagle3OfficialLayout, AHeadWrittenInPythonLoadsAndGivesItsLogits) {
  if (!python_has_torch())
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch): the independent writer cannot run";
  auto target = tiny_model();
  const PythonHead py = write_python_head(*target, "official", fresh_dir("eagle3_python"));
  convert_torch_checkpoint(py.dir + "/head/pytorch_model.bin", py.dir + "/converted");
  EXPECT_EQ(head_family_of(py.dir + "/converted").name, "eagle3");
  expect_python_logits(*Eagle3Head::load(py.dir + "/converted", *target), py, 1e-4);
}

// EAGLE-3.1 as SpecForge exports it (bfloat16 safetensors, eagle_config's layer ids, rope_theta, fc_norm and
// norm_output), on both CPU paths; its vocabulary-mapping file; draftlab's own save of it; and the GGUF refusal.
TEST(Eagle3OfficialLayout, ASpecForgeEagle31HeadLoadsAndGivesItsLogits) {
  if (!python_has_torch())
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch): the independent writer cannot run";
  // One Python run (the two paths' targets have the same weights).
  const PythonHead py = write_python_head(*tiny_model(), "specforge31", fresh_dir("eagle31_python"));
  const std::string folder = py.dir + "/head";
  for (CpuPath path : {CpuPath::Native, CpuPath::Reference}) {
    auto target = tiny_model(at::kFloat, 2, 7, false, 97, path);
    EXPECT_EQ(head_family_of(folder).name, "eagle3");
    const auto head = Eagle3Head::load(folder, *target);
    EXPECT_TRUE(head->is_eagle31());
    EXPECT_EQ(head->weights().fc_norm.size(), 3u);
    EXPECT_TRUE(head->weights().norm_output);
    // eagle_config's ids name the layers whose OUTPUTS are read: the inputs of the next ones.
    EXPECT_EQ(head->input_layers(), (std::vector<int64_t>{2, 1, 2}));
    EXPECT_EQ(head->config().rope_theta, 500000.0);
    expect_python_logits(*head, py, 1e-4);

    // The vocabulary-mapping file holds the head's draft vocabulary.
    EXPECT_TRUE(at::equal(read_vocabulary_mapping(py.dir + "/vocab_mapping.pt", 97), head->draft_ids()));

    // draftlab's own file of it: both flags written, both layer keys, the same logits.
    const std::string mine = fresh_dir("eagle31_saved");
    head->save(mine);
    const auto config = nlohmann::json::parse(std::ifstream(mine + "/config.json"));
    EXPECT_EQ(config.at("fc_norm"), true);
    EXPECT_EQ(config.at("norm_output"), true);
    EXPECT_EQ(config.at("eagle_config").at("eagle_aux_hidden_state_layer_ids"), nlohmann::json({1, 0, 1}));
    expect_python_logits(*Eagle3Head::load(mine, *target), py, 1e-4);
  }
  // Without "fc_norm": true in config.json, fc_norm tensors are refused by name.
  auto target = tiny_model();
  auto j = nlohmann::json::parse(std::ifstream(folder + "/config.json"));
  j.erase("fc_norm");
  std::ofstream(folder + "/config.json") << j.dump();
  expect_error([&] { Eagle3Head::load(folder, *target); }, {"unexpected tensor 'fc_norm.0.weight'", "fc_norm"});
  j["fc_norm"] = "yes";
  std::ofstream(folder + "/config.json") << j.dump();
  expect_error([&] { Eagle3Head::load(folder, *target); }, {"config.json", "fc_norm", "true or false", "yes"});
}

// What a vocabulary-mapping file may hold, each mistake named.
TEST(Eagle3OfficialLayout, AVocabularyMappingFileIsCheckedEntryByEntry) {
  if (!python_has_torch())
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch): the independent writer cannot run";
  const std::string dir = fresh_dir("vocab_mapping");
  // One Python process writes every file (importing torch takes seconds).
  const std::string script =
      "import sys, torch\n"
      "d = sys.argv[1]\n"
      "t2d = torch.zeros(10, dtype=torch.bool)\n"
      "t2d[[0, 2, 7]] = True\n"
      "torch.save({'d2t': torch.tensor([0, 1, 5]), 't2d': t2d}, d + '/good.pt')\n"
      "torch.save({'d2t': torch.tensor([0, 1, 50])}, d + '/range.pt')\n"
      "torch.save({'d2t': torch.tensor([0, 0]), 't2d': torch.ones(10, dtype=torch.bool)}, d + '/t2d.pt')\n"
      "torch.save({'d2t': torch.tensor([0]), 'extra': torch.tensor([1])}, d + '/other.pt')\n"
      "torch.save({'t2d': torch.ones(10, dtype=torch.bool)}, d + '/none.pt')\n";
  std::ofstream(dir + "/write.py") << script;
  ASSERT_EQ(std::system(("/usr/bin/python3 " + dir + "/write.py " + dir).c_str()), 0);
  const std::string good = dir + "/good.pt", range = dir + "/range.pt", t2d = dir + "/t2d.pt";
  const std::string other = dir + "/other.pt", none = dir + "/none.pt";
  EXPECT_TRUE(at::equal(read_vocabulary_mapping(good, 10), long_tensor({0, 2, 7})));
  expect_error([&] { read_vocabulary_mapping(good, 8); }, {"good.pt", "t2d", "[8]"});
  expect_error([&] { read_vocabulary_mapping(range, 10); }, {"range.pt", "d2t", "outside [0, 10)"});
  expect_error([&] { read_vocabulary_mapping(t2d, 10); }, {"t2d.pt", "t2d", "target id 2", "d2t says out"});
  expect_error([&] { read_vocabulary_mapping(other, 10); }, {"other.pt", "unexpected entry 'extra'"});
  expect_error([&] { read_vocabulary_mapping(none, 10); }, {"none.pt", "no entry 'd2t'"});
}

// Any strategy's begin() and observe() get the target features it asks for: with feature layers, the residual
// after those layers side by side, as one forward over the final sequence computes them.
class FeatureSpy : public SequenceStrategy {
 public:
  std::string name() const override { return "feature-spy"; }
  std::vector<int64_t> target_feature_layers() const override { return {1, 0}; }
  void begin(const std::vector<int64_t>&, const at::Tensor& features, int64_t) override { rows.push_back(features); }
  DraftTree propose(const DraftRequest& request) override {
    DraftTree tree;  // a two-token chain, so that some cycles accept nodes
    const int64_t t = (request.sequence.back() * 7 + 3) % 97;
    tree.add(t, -1);
    tree.add((t * 7 + 3) % 97, 0);
    return tree;
  }
  void observe(const VerifyResult& result) override { rows.push_back(result.features); }
  std::vector<at::Tensor> rows;
};

TEST(FeatureLayers, DecodersHandTheStrategyTheLayersItAsksFor) {
  auto target = tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Reference);
  const std::vector<int64_t> prompt{3, 9, 27, 81};
  GenerationConfig config;
  config.max_new_tokens = 12;
  FeatureSpy spy;
  const auto result = SpeculativeDecoder(*target, spy).generate(prompt, config);
  std::vector<int64_t> sequence = prompt;
  sequence.insert(sequence.end(), result.tokens.begin(), result.tokens.end());
  KvCache cache = target->make_cache(64);
  ForwardOptions fo;
  fo.feature_layers = {1, 0};
  const auto all = target->forward_chain(cache, sequence, fo).features;
  const auto got = at::cat(spy.rows, 0);
  ASSERT_EQ(got.size(1), 2 * target->config().hidden_size);
  // Rows: the prompt's, then each cycle's root and accepted nodes (the last root, never verified, is not there).
  ASSERT_EQ(got.size(0), static_cast<int64_t>(sequence.size()) - 1);
  EXPECT_LT(rel_diff(got, all.narrow(0, 0, got.size(0))), 1e-5);

  FeatureSpy a, b;
  SpeculativeDecoder batch(*target, {&a, &b});
  const auto results = batch.generate({{prompt, 1}, {prompt, 2}}, config);
  EXPECT_EQ(at::cat(a.rows, 0).size(1), 2 * target->config().hidden_size);
  EXPECT_LT(rel_diff(at::cat(a.rows, 0), all.narrow(0, 0, at::cat(a.rows, 0).size(0))), 1e-5);
}

}  // namespace
