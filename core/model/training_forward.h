// The Llama forward for training: a batch of token windows [B, T] through the same weights, RoPE and GQA
// conventions as LlamaModel::forward, but with no KV cache and every op differentiable (autograd records it).
// A model trained through this function and saved with LlamaModel::save_hf gives the same logits at inference.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "core/io/model_config.h"
#include "core/model/llama_weights.h"
#include "core/model/rope.h"

namespace draftlab {

// tokens [B, T] int64 (positions 0..T-1, causal) -> logits [B, T, vocab] float32 (float64 when the weights
// are float64: gradient checks).
// A tied LM head uses `weights.embed` itself (weights.lm_head is ignored), so both roles train one tensor.
// Throws Error on a bad shape or a window longer than the RoPE table.
// router_logits: as training_features.
at::Tensor training_forward(const ModelConfig& config, const LlamaWeights& weights, const RotaryEmbedding& rope,
                            const at::Tensor& tokens, std::vector<at::Tensor>* router_logits = nullptr);

// training_forward over any rows: tokens [B, T] at RoPE positions [T] (int64), row i attending to row j where the
// additive mask [T, T] is 0 (-inf elsewhere; every row must allow itself). Parallel drafters train through it:
// several copies of a window, each row seeing only what it would see at inference. Throws Error on bad shapes.
at::Tensor training_forward_masked(const ModelConfig& config, const LlamaWeights& weights, const RotaryEmbedding& rope,
                                   const at::Tensor& tokens, const at::Tensor& positions, const at::Tensor& mask);

// The final normed hidden states [B, T, d] of the same forward (what LlamaModel::forward returns as features),
// in the weights' dtype: training_forward is these through the LM head.
// router_logits, when given, receives each mixture-of-experts layer's router logits [B T, E] (the load-balancing
// loss reads them).
at::Tensor training_features(const ModelConfig& config, const LlamaWeights& weights, const RotaryEmbedding& rope,
                             const at::Tensor& tokens, std::vector<at::Tensor>* router_logits = nullptr);

// training_features with EAGLE-3's layer features in front: [B, T, (k + 1) d] = the residual after each of
// `feature_layers` (ForwardOptions::feature_layers' indices), side by side, then the final normed hidden state.
// Empty feature_layers: training_features itself.
at::Tensor training_layer_features(const ModelConfig& config, const LlamaWeights& weights, const RotaryEmbedding& rope,
                                   const at::Tensor& tokens, const std::vector<int64_t>& feature_layers);

// Additive causal mask [T, T]: 0 on and below the diagonal, -inf above.
at::Tensor causal_mask(int64_t length, const at::TensorOptions& options);

// One batched, differentiable decoder layer: h [B, T, d] -> [B, T, d]. cos/sin from rope.at_positions(positions
// [T]); mask [T, T] additive. input_norm false skips the attention RMSNorm (the EAGLE head's layer has none).
at::Tensor training_decoder_layer(const ModelConfig& config, const LlamaLayerWeights& layer, const at::Tensor& h,
                                  const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask,
                                  bool input_norm = true, at::Tensor* router_logits = nullptr);

// Mean next-token cross-entropy of windows [B, T + 1]: inputs are [:, :T], targets [:, 1:].
at::Tensor next_token_loss(const ModelConfig& config, const LlamaWeights& weights, const RotaryEmbedding& rope,
                           const at::Tensor& windows);

// What a language model trains on: next_token_loss plus, for a mixture of experts with router_aux_loss_coef > 0,
// that coefficient times the load-balancing loss (mixture_of_experts.h), as Hugging Face's Mixtral does with
// output_router_logits. Validation reports next_token_loss alone.
at::Tensor language_model_training_loss(const ModelConfig& config, const LlamaWeights& weights,
                                        const RotaryEmbedding& rope, const at::Tensor& windows);

// The tensors that training updates, by stable names ("embed", "layers.0.wqkv", ..., "lm_head" unless tied).
// They share storage with `weights`: an in-place update of one is an update of the other.
std::vector<std::pair<std::string, at::Tensor>> trainable_parameters(const ModelConfig& config,
                                                                     const LlamaWeights& weights);

// Detached copies of the trained weights laid out for inference (tied head re-copied from embed; column-major).
LlamaWeights inference_weights(const ModelConfig& config, const LlamaWeights& trained);

}  // namespace draftlab
