// EagleHead - the EAGLE draft head (EAGLE paper section 3, Figure 6; SafeAILab/EAGLE eagle/model/cnets1.py).
//
// It autoregresses at the feature level: the input at head position i is the pair (token t_{i+1}, feature f_i),
// where f_i is the target's final normed hidden state at position i, and the output is a prediction of f_{i+1}.
// The target's LM head turns that predicted feature into the distribution of t_{i+2}.
//
//   x = fc(concat(embed(t_{i+1}), f_i))          fc: Linear(2d -> d) with bias; embedding FIRST, then feature
//   h = x + attention(x)                           NO input RMSNorm (cnets1: layer 0 has no input_layernorm)
//   out = h + mlp(post_attention_layernorm(h))     SwiGLU, as in Llama
//   predicted feature = out                        NO final norm; logits = target LM head(out)
//
// The embedding and the LM head are the target's (frozen, not stored in the head), so a head is only meaningful
// next to the target it was trained for; load() checks hidden and vocabulary sizes against it.
//
// On disk (the published heads' layout): a folder with config.json (Hugging Face Llama keys, num_hidden_layers 1,
// optional "bias": false for a bias-free fc as the official loader reads it, plus "draftlab_eagle_input") and
// model.safetensors with exactly these tensors (see checkpoint_keys()):
//   fc.weight [d, 2d], fc.bias [d] (unless "bias": false),
//   layers.0.self_attn.{q,k,v,o}_proj.weight, layers.0.post_attention_layernorm.weight,
//   layers.0.mlp.{gate,up,down}_proj.weight
// Also accepted and ignored: embed_tokens.weight (the official Model registers the target's embedding as a module,
// so published checkpoints carry a copy) and *.rotary_emb.inv_freq (a buffer older transformers versions saved).
// Refused: layers.0.input_layernorm.weight. The official layer 0 has no input norm; a checkpoint carrying one was
// trained with a different architecture, and running it without (or with) that norm would silently draft
// garbage, so load() fails naming the key. Any other unknown key is refused too (e.g. an EAGLE-3 head).
// Published heads ship pytorch_model.bin; convert them to safetensors first (keys unchanged).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "core/io/model_config.h"
#include "core/model/compute_options.h"
#include "core/model/kv_cache.h"
#include "core/model/llama_model.h"
#include "core/model/llama_weights.h"
#include "core/model/rope.h"

namespace draftlab {

// What the head takes as input. Only the EAGLE-1/2 variant exists now; the name is recorded in config.json
// ("draftlab_eagle_input") so that later variants cannot be loaded as this one by mistake.
inline constexpr const char* kEagleInputFeatureShiftedToken = "feature_shifted_token";

struct EagleHeadWeights {
  at::Tensor fc;       // [d, 2d] column-major: input = concat(embedding, feature)
  at::Tensor fc_bias;  // [d], undefined for a bias-free fc
  // The single decoder layer, fused like the target's (wqkv, w_gate_up); attn_norm is undefined (no input norm).
  LlamaLayerWeights layer;
};

class EagleHead {
 public:
  // config: the head's own shape (num_hidden_layers must be 1). `target` supplies embedding and LM head and must
  // outlive the head. Compute options (device, dtype) are the target's.
  EagleHead(ModelConfig config, EagleHeadWeights weights, const LlamaModel& target,
            std::string input_variant = kEagleInputFeatureShiftedToken);

  // Loads a head folder (config.json + model.safetensors) or a .safetensors file with config.json beside it.
  // Throws Error naming the file and field: missing/unexpected tensors, wrong shapes, and a hidden or vocabulary
  // size that differs from the target's (both values named).
  static std::unique_ptr<EagleHead> load(const std::string& path, const LlamaModel& target);

  // A randomly initialised head for `target` (for when no trained head exists): the target's shape with one
  // layer; projections normal(0, 0.02) as Hugging Face initialises, norm weights 1, fc bias 0. Deterministic in
  // seed. Useless as a drafter, but any head must keep decoding lossless, which is what tests check with it.
  static std::unique_ptr<EagleHead> random(const LlamaModel& target, uint64_t seed);

  // Writes a head folder in file_dtype (float32/float16/bfloat16): config.json and model.safetensors.
  void save(const std::string& dir, at::ScalarType file_dtype = at::kFloat) const;

  // The exact tensor names of a head checkpoint (the published layout above), in file order.
  static std::vector<std::string> checkpoint_keys(bool fc_bias = true);

  // A cache for the head's single layer.
  KvCache make_cache(int64_t capacity) const;

  // Appends n pairs at cache rows [cache.length(), +n) and returns the predicted next features [n, d] (compute
  // dtype). tokens [n] int64 (t_{i+1}), features [n, d] (f_i), positions [n] int64; ancestor_mask [n, n] bool
  // among the new rows (undefined = causal), the cached prefix always visible: the target forward's contract.
  at::Tensor forward(KvCache& cache, const at::Tensor& tokens, const at::Tensor& features, const at::Tensor& positions,
                     const at::Tensor& ancestor_mask = {}) const;

  // The general form tree drafting needs, where earlier draft rows sit in the cache but only a node's ancestors
  // may be seen: visible [n, cache.length() + n] bool says which cached and new rows each new row attends to
  // (undefined = all of them).
  at::Tensor forward_visible(KvCache& cache, const at::Tensor& tokens, const at::Tensor& features,
                             const at::Tensor& positions, const at::Tensor& visible) const;

  // Next-token logits [n, vocab] float32 from predicted features [n, d], through the target's LM head.
  at::Tensor logits(const at::Tensor& predicted_features) const;
  // softmax(logits): the head's raw next-token distribution (no temperature), EAGLE-2's "confidence".
  at::Tensor probabilities(const at::Tensor& predicted_features) const;

  const ModelConfig& config() const { return config_; }
  const EagleHeadWeights& weights() const { return weights_; }
  const std::string& input_variant() const { return input_variant_; }
  const ComputeOptions& options() const { return target_.options(); }
  const LlamaModel& target() const { return target_; }
  int64_t num_parameters() const;

 private:
  at::Tensor run(KvCache& cache, const at::Tensor& tokens, const at::Tensor& features, const at::Tensor& positions,
                 const at::Tensor& additive_mask) const;

  ModelConfig config_;
  EagleHeadWeights weights_;
  const LlamaModel& target_;
  std::string input_variant_;
  RotaryEmbedding rope_;
};

}  // namespace draftlab
