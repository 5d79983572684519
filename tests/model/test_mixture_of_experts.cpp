// Mixture-of-experts targets (Mixtral): the routing rule against a naive per-row loop, the native path against
// the reference path in the experts they read, every strategy lossless on an MoE target, checkpoints (safetensors,
// GGUF merged experts) and training. Logits of both paths and tree rows: test_native_path.cpp on ts-moe.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/decoding/speculative_decoder.h"
#include "core/io/gguf_checkpoint.h"
#include "core/model/llama_layer.h"
#include "core/model/mixture_of_experts.h"
#include "core/model/training_forward.h"
#include "core/text/tokenizer.h"
#include "core/training/gguf_export.h"
#include "decoding/lossless_fixtures.h"
#include "model_fixtures.h"
#include "test_errors.h"
#include "test_paths.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

// The rule of mixture_of_experts.h written out per row in double precision: the independent truth.
at::Tensor naive_moe(const at::Tensor& x_in, const LlamaLayerWeights& L, const ModelConfig& c) {
  const auto x = x_in.to(at::kDouble);
  const int64_t rows = x.size(0), E = c.num_local_experts, k = c.num_experts_per_tok, I = c.intermediate_size;
  auto out = at::zeros_like(x);
  for (int64_t r = 0; r < rows; ++r) {
    const auto xr = x[r];
    std::vector<double> p(E);
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(at::dot(L.router[e].to(at::kDouble), xr).item<double>());
    for (double& v : p) v /= sum;
    std::vector<int64_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    std::set<int64_t> chosen(order.begin(), order.begin() + k);
    double chosen_sum = 0;
    for (int64_t e : chosen) chosen_sum += p[e];
    for (int64_t e : chosen) {
      const auto gu = at::mv(L.expert_gate_up[e].to(at::kDouble), xr);
      const auto h = at::silu(gu.narrow(0, 0, I)) * gu.narrow(0, I, I);
      out[r] += p[e] / chosen_sum * at::mv(L.expert_down[e].to(at::kDouble), h);
    }
  }
  return out;
}

at::Tensor chain_logits(const LlamaModel& m, const std::vector<int64_t>& tokens, int64_t* experts_read = nullptr) {
  KvCache cache = m.make_cache(static_cast<int64_t>(tokens.size()));
  auto out = m.forward_chain(cache, tokens);
  if (experts_read) *experts_read = out.experts_read;
  return out.logits;
}

const std::vector<int64_t> kSeq{1, 17, 33, 5, 60, 2, 91, 44, 12, 70, 33, 5};

TEST(MixtureOfExperts, LayerFollowsTheRuleOfANaivePerRowLoop) {
  auto model = tiny_moe_model(at::kFloat, 3, CpuPath::Reference, /*experts=*/6, /*k=*/3);
  const ModelConfig& c = model->config();
  const LlamaLayerWeights& L = model->weights().layers[1];
  const auto x = at::randn({9, c.hidden_size}, at::TensorOptions().dtype(at::kFloat));
  int64_t read = 0;
  const auto got = mixture_of_experts(x, L, c, project, nullptr, &read);
  const auto want = naive_moe(x, L, c);
  EXPECT_LT(rel_diff(got, want), 1e-5);
  EXPECT_GE(read, 3);
  EXPECT_LE(read, 6);
}

TEST(MixtureOfExperts, HostRoutingPicksTheKMostProbableTiesToTheLowerIndexAndRenormalises) {
  // Rows: distinct logits; a tie between experts 1 and 3 for the second place; all equal.
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f,   //
                                     3.0f, 1.0f, 0.0f, 1.0f,    //
                                     0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<int32_t> experts(6);
  std::vector<float> weights(6);
  route_rows(logits.data(), 3, 4, 2, experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{1, 3, 0, 1, 0, 1}));
  const double e1 = std::exp(1.0);  // row 0: softmax of (2, 1) renormalised
  EXPECT_NEAR(weights[0], e1 / (e1 + 1.0), 1e-6);
  EXPECT_NEAR(weights[0] + weights[1], 1.0, 1e-6);
  EXPECT_NEAR(weights[4], 0.5, 1e-7);
  EXPECT_NEAR(weights[5], 0.5, 1e-7);
}

// (Logits of both paths, greedy tokens and tree rows bit-identical to their paths on the native path: the
// NativeVersusReference suite in test_native_path.cpp, on ts-moe.)
TEST(MixtureOfExperts, BothPathsReadTheSameExpertsKPerLayerForOneToken) {
  auto native = tiny_moe_model(at::kFloat, 5, CpuPath::Native);
  auto reference = tiny_moe_model(at::kFloat, 5, CpuPath::Reference);
  ASSERT_NE(native->native(), nullptr);
  ASSERT_EQ(reference->native(), nullptr);
  int64_t native_read = 0, reference_read = 0;
  chain_logits(*native, kSeq, &native_read);
  chain_logits(*reference, kSeq, &reference_read);
  EXPECT_EQ(native_read, reference_read);
  // One token reads k experts per layer; 12 tokens read more, at most all of them.
  const ModelConfig& c = native->config();
  EXPECT_GT(native_read, c.num_hidden_layers * c.num_experts_per_tok);
  EXPECT_LE(native_read, c.num_hidden_layers * c.num_local_experts);
  int64_t one = 0;
  chain_logits(*native, {kSeq[0]}, &one);
  EXPECT_EQ(one, c.num_hidden_layers * c.num_experts_per_tok);
}

// Every strategy of the registry on an MoE target, native path: identical tokens to vanilla decoding.
class MoeLossless : public ::testing::TestWithParam<StrategyConfig> {
 protected:
  static void SetUpTestSuite() {
    target_dir = fresh_dir("moe_target");
    other_dir = fresh_dir("moe_other");
    tiny_moe_model(at::kFloat, 21)->save_hf(target_dir, at::kFloat);
    tiny_moe_model(at::kFloat, 22)->save_hf(other_dir, at::kFloat);
  }
  static std::string target_dir, other_dir;
};
std::string MoeLossless::target_dir, MoeLossless::other_dir;

std::vector<StrategyConfig> moe_configs() {
  // Paths are filled in at run time (the folders are written by SetUpTestSuite).
  return all_strategy_configs("@target@", "@other@");
}

TEST_P(MoeLossless, SameTokensAsVanilla) {
  ComputeOptions o;
  o.cpu_path = CpuPath::Native;
  auto target = LlamaModel::load(target_dir, o);
  ASSERT_TRUE(target->config().mixture_of_experts());
  StrategyConfig config = GetParam();
  for (auto& option : config.options)
    for (const auto& [key, path] : {std::pair<std::string, std::string>{"@target@", target_dir}, {"@other@", other_dir}})
      for (size_t at = option.find(key); at != std::string::npos; at = option.find(key)) option.replace(at, key.size(), path);
  auto strategy = make_strategy(config.name, StrategyContext{*target}, StrategyOptions::parse(config.options));
  GenerationConfig gen;
  gen.max_new_tokens = 24;
  gen.stop_tokens = {};
  // Prompts with repeats, so that lookup strategies find matches.
  const std::vector<std::vector<int64_t>> prompts = {
      {1, 17, 33, 5, 60, 17, 33, 5}, {1, 2, 3, 4, 2, 3, 4, 2}, {1, 91, 44, 12, 70, 91, 44}, {1, 50}};
  for (const auto& prompt : prompts) {
    const auto want = generate_vanilla(*target, prompt, gen).tokens;
    SpeculativeDecoder decoder(*target, *strategy);
    const auto got = decoder.generate(prompt, gen);
    EXPECT_EQ(got.tokens, want) << config.label;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryStrategy, MoeLossless, ::testing::ValuesIn(moe_configs()),
                         [](const ::testing::TestParamInfo<StrategyConfig>& info) { return info.param.label; });

TEST(MixtureOfExperts, SafetensorsRoundTripKeepsMixtralNamesAndLogits) {
  auto model = tiny_moe_model(at::kFloat, 4, CpuPath::Native);
  const std::string dir = fresh_dir("moe_rt");
  model->save_hf(dir, at::kFloat);
  const auto config = nlohmann::json::parse(read_text_file(dir + "/config.json"));
  EXPECT_EQ(config["model_type"], "mixtral");
  EXPECT_EQ(config["architectures"][0], "MixtralForCausalLM");
  EXPECT_EQ(config["num_local_experts"], 4);
  EXPECT_EQ(config["num_experts_per_tok"], 2);
  auto loaded = LlamaModel::load(dir, ComputeOptions{});
  EXPECT_TRUE(at::equal(chain_logits(*model, kSeq), chain_logits(*loaded, kSeq)));
}

TEST(MixtureOfExperts, WrongExpertCountAndBadTopKAreNamed) {
  auto model = tiny_moe_model(at::kFloat, 4, CpuPath::Reference);
  const std::string dir = fresh_dir("moe_bad");
  model->save_hf(dir, at::kFloat);
  auto config = nlohmann::json::parse(read_text_file(dir + "/config.json"));
  config["num_local_experts"] = 5;  // the file holds 4
  write_file_atomically(dir + "/config.json", config.dump());
  expect_error([&] { LlamaModel::load(dir, ComputeOptions{}); },
               {dir, "model.layers.0.block_sparse_moe.gate.weight", "[5, 64]", "[4, 64]"});
  config["num_local_experts"] = 4;
  config["num_experts_per_tok"] = 5;
  write_file_atomically(dir + "/config.json", config.dump());
  expect_error([&] { LlamaModel::load(dir, ComputeOptions{}); }, {"config.json", "num_experts_per_tok", "1..4"});
}

TEST(MixtureOfExperts, GgufExportMergesExpertsAndReadsBackTheSameModel) {
  const std::string tok_path = source_path("data/models/ts-tiny");
  auto tok = load_tokenizer(tok_path);
  auto model = tiny_moe_model(at::kFloat, 6, CpuPath::Native, 4, 2, tok->vocab_size());
  const std::string path = fresh_dir("moe_gguf") + "/moe.gguf";
  export_gguf(*model, *tok, path, kGgmlF32, "tiny-moe");
  GgufTensorFile file(path);
  const TensorEntry* gate = file.find("blk.1.ffn_gate_exps.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->shape, (std::vector<int64_t>{4, 64, 64}));
  ASSERT_NE(file.find("blk.1.ffn_gate_inp.weight"), nullptr);
  EXPECT_EQ(file.gguf().get_int("llama.expert_count"), 4);
  EXPECT_EQ(file.gguf().get_int("llama.expert_used_count"), 2);
  auto loaded = LlamaModel::load(path, ComputeOptions{});
  EXPECT_TRUE(loaded->config().mixture_of_experts());
  // F32 GGUF: the same values, so the same logits bit for bit on the native path.
  EXPECT_TRUE(at::equal(chain_logits(*model, kSeq), chain_logits(*loaded, kSeq)));
  // Q8_0: the router stays F32 (as llama.cpp keeps it), experts quantized.
  export_gguf(*model, *tok, path, kGgmlQ8_0, "tiny-moe");
  GgufTensorFile q8(path);
  EXPECT_EQ(q8.stored_type("blk.0.ffn_gate_inp.weight"), static_cast<uint32_t>(kGgmlF32));
  EXPECT_EQ(q8.stored_type("blk.0.ffn_down_exps.weight"), static_cast<uint32_t>(kGgmlQ8_0));
  auto quantized = LlamaModel::load(path, ComputeOptions{});
  EXPECT_EQ(quantized->native()->storage(), WeightStorage::Q8_0);
  // Q8_0 panels compute over exactly the dequantized values: the same logits as the file loaded as float32.
  ComputeOptions dequantized;
  dequantized.weights = WeightStorage::Float32;
  EXPECT_TRUE(at::equal(chain_logits(*quantized, kSeq), chain_logits(*LlamaModel::load(path, dequantized), kSeq)));
  EXPECT_LT(rel_diff(chain_logits(*quantized, kSeq), chain_logits(*model, kSeq)), 0.1);
}

TEST(MixtureOfExperts, TrainingForwardGivesTheInferenceLogitsAndTheBalancingLossIsKWhenUniform) {
  auto model = tiny_moe_model(at::kFloat, 8, CpuPath::Reference);
  const ModelConfig& c = model->config();
  const RotaryEmbedding rope(c, ComputeOptions{});
  const auto tokens = long_tensor(kSeq).unsqueeze(0);
  std::vector<at::Tensor> router_logits;
  const auto features = training_features(c, model->weights(), rope, tokens, &router_logits);
  EXPECT_EQ(static_cast<int64_t>(router_logits.size()), c.num_hidden_layers);
  const auto logits = at::matmul(features[0], model->weights().lm_head.t());
  EXPECT_LT(rel_diff(logits, chain_logits(*model, kSeq)), 1e-4);
  // Uniform router logits: every expert equally likely; top-k then ties - the loss is k whatever is chosen.
  const auto uniform = at::zeros({64, c.num_local_experts});
  EXPECT_NEAR(load_balancing_loss({uniform}, c.num_local_experts, c.num_experts_per_tok).item<double>(),
              static_cast<double>(c.num_experts_per_tok), 1e-6);
  // Every row on experts 0 and 1 (probability 1/2 each; one slot each): E (1 · 1/2 + 1 · 1/2) = E, above k.
  auto skewed = at::full({64, c.num_local_experts}, -30.0);
  skewed.narrow(1, 0, 2).fill_(0.0);
  EXPECT_NEAR(load_balancing_loss({skewed}, c.num_local_experts, c.num_experts_per_tok).item<double>(),
              static_cast<double>(c.num_local_experts), 1e-4);
}

TEST(MixtureOfExperts, TrainingLowersTheLossAndGradientsReachEveryRouter) {
  auto model = tiny_moe_model(at::kFloat, 8, CpuPath::Reference);
  ModelConfig c = model->config();
  c.router_aux_loss_coef = 0.01;
  LlamaWeights w = inference_weights(c, model->weights());
  const RotaryEmbedding rope(c, ComputeOptions{});
  auto params = trainable_parameters(c, w);
  for (auto& [name, p] : params) p.requires_grad_(true);
  const auto windows = long_tensor({1, 17, 33, 5, 60, 2, 91, 44, 12, 70, 33, 5, 60}).unsqueeze(0);
  const double before = language_model_training_loss(c, w, rope, windows).item<double>();
  for (int step = 0; step < 30; ++step) {
    for (auto& [name, p] : params) p.mutable_grad() = at::Tensor();
    auto loss = language_model_training_loss(c, w, rope, windows);
    loss.backward();
    at::NoGradGuard no_grad;
    for (auto& [name, p] : params) {
      if (name.find("router") != std::string::npos) EXPECT_TRUE(p.grad().defined()) << name;
      if (p.grad().defined()) p.sub_(p.grad() * 1e-3);
    }
  }
  const double after = language_model_training_loss(c, w, rope, windows).item<double>();
  EXPECT_LT(after, before * 0.8);
}

}  // namespace
