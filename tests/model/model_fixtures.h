// Small models for tests: random weights of a chosen shape (GQA by default), built in milliseconds.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/decoding/vanilla_decoder.h"
#include "core/model/llama_model.h"
#include "strategies/parallel_heads/parallel_head_training.h"
#include "core/training/text_dataset.h"

namespace draftlab::testing {

inline ModelConfig tiny_config(int64_t kv_heads = 2, bool tied = false, int64_t vocab = 97) {
  ModelConfig c;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = kv_heads;
  c.head_dim = 16;
  c.vocab_size = vocab;
  c.max_position_embeddings = 128;
  c.tie_word_embeddings = tied;
  c.rms_norm_eps = 1e-5;
  c.validate("tiny_config");
  return c;
}

// Random weights of config c scaled up (std 0.02 makes every logit ~0, hiding bugs): std 0.3 gives peaked, varied
// outputs; a router at std 0.4 spreads tokens over the experts. Cast to dtype, column-major.
inline LlamaWeights scaled_test_weights(const ModelConfig& c, uint64_t seed, at::ScalarType dtype) {
  LlamaWeights w = random_llama_weights(c, seed, ComputeOptions{});  // float32, then scaled and cast
  auto scale = [&](at::Tensor& t, double s) {
    if (t.defined()) t = (t * s).to(dtype);
  };
  scale(w.embed, 50.0);
  for (auto& L : w.layers) {
    for (at::Tensor* t : {&L.wqkv, &L.wo, &L.w_gate_up, &L.w_down}) scale(*t, 10.0);
    for (auto* experts : {&L.expert_gate_up, &L.expert_down})
      for (auto& e : *experts) scale(e, 10.0);
    scale(L.router, 20.0);
    scale(L.attn_norm, 1.0);
    scale(L.mlp_norm, 1.0);
  }
  scale(w.norm, 1.0);
  w.lm_head = c.tie_word_embeddings ? w.embed : (w.lm_head * 50.0).to(dtype);
  use_column_major(w);
  return w;
}

inline std::unique_ptr<LlamaModel> tiny_model(at::ScalarType dtype = at::kFloat, int64_t kv_heads = 2,
                                              uint64_t seed = 7, bool tied = false, int64_t vocab = 97,
                                              CpuPath path = CpuPath::Auto) {
  ComputeOptions o;
  o.dtype = dtype;
  o.cpu_path = path;
  const ModelConfig c = tiny_config(kv_heads, tied, vocab);
  return std::make_unique<LlamaModel>(c, scaled_test_weights(c, seed, dtype), o);
}

// tiny_model's shape with a mixture of experts in every layer (4 experts of intermediate 64, top-2).
inline std::unique_ptr<LlamaModel> tiny_moe_model(at::ScalarType dtype = at::kFloat, uint64_t seed = 7,
                                                  CpuPath path = CpuPath::Auto, int64_t experts = 4, int64_t k = 2,
                                                  int64_t vocab = 97) {
  ComputeOptions o;
  o.dtype = dtype;
  o.cpu_path = path;
  ModelConfig c = tiny_config(/*kv_heads=*/2, /*tied=*/false, vocab);
  c.intermediate_size = 64;  // a multiple of 32: Q8_0 / Q4_0 blocks
  c.num_local_experts = experts;
  c.num_experts_per_tok = k;
  c.validate("tiny_moe_config");
  return std::make_unique<LlamaModel>(c, scaled_test_weights(c, seed, dtype), o);
}

// tiny_model (or tiny_moe_model when moe) under any compute options: weight storage, dot products, KV cache.
inline std::unique_ptr<LlamaModel> tiny_model_under(const ComputeOptions& o, uint64_t seed, int64_t vocab,
                                                    bool moe = false) {
  ModelConfig c = tiny_config(/*kv_heads=*/2, /*tied=*/false, vocab);
  if (moe) {
    c.intermediate_size = 64;
    c.num_local_experts = 4;
    c.num_experts_per_tok = 2;
    c.validate("tiny_moe_config");
  }
  return std::make_unique<LlamaModel>(c, scaled_test_weights(c, seed, o.dtype), o);
}

inline at::Tensor long_tensor(const std::vector<int64_t>& v) {
  return at::tensor(v, at::TensorOptions().dtype(at::kLong));
}

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kFloat) - b.to(at::kFloat)).abs().max().item<double>();
}

// max |a - b| relative to the scale of b (at least 1): comparable across dtypes and logit magnitudes.
inline double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  const double scale = std::max(1.0, b.to(at::kFloat).abs().max().item<double>());
  return max_abs_diff(a, b) / scale;
}

// Training data for draft heads: 40 greedy continuations of the target (60 tokens each, from two-token prompts),
// every 8th in the validation stream. What the heads learn to predict is then the target's own behaviour.
inline TextDataset target_generated_dataset(const LlamaModel& target) {
  std::vector<int32_t> train, val;
  GenerationConfig gen;
  gen.max_new_tokens = 60;
  for (int i = 0; i < 40; ++i) {
    const auto out = generate_vanilla(target, {0, 5 + i}, gen);
    auto& stream = i % 8 == 7 ? val : train;
    stream.insert(stream.end(), {0, 5 + i});
    for (int64_t t : out.tokens) stream.push_back(static_cast<int32_t>(t));
  }
  return TextDataset(std::move(train), std::move(val));
}

// A 40-step parallel-head run (Medusa, Hydra) on target_generated_dataset: 4 windows of 32 tokens per step,
// validation before the first step and after the last, written to out_dir.
inline ParallelHeadTrainingOptions short_parallel_head_run(const std::string& out_dir) {
  ParallelHeadTrainingOptions o;
  o.batch = 4;
  o.context = 32;
  o.eval_windows = 8;
  o.trainer.steps = 40;
  o.trainer.lr = 3e-3;
  o.trainer.warmup = 4;
  o.trainer.weight_decay = 0;
  o.trainer.eval_every = 40;
  o.trainer.quiet = true;
  o.out_dir = out_dir;
  return o;
}

}  // namespace draftlab::testing
