// The building blocks of a Llama decoder, shared by LlamaModel and the EAGLE draft head.
#pragma once

#include <ATen/ATen.h>

#include "core/io/model_config.h"
#include "core/model/compute_options.h"
#include "core/model/kv_cache.h"
#include "core/model/llama_weights.h"

namespace draftlab {

// x @ w^T for w [out, in] (fast paths for column-major w and single rows).
at::Tensor project(const at::Tensor& x, const at::Tensor& w);

// RMSNorm computed in float32 whatever the compute dtype (as Hugging Face does).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// Additive attention mask [n, start + n] for n new rows after `start` cached rows: the prefix is visible, the new
// rows see what the ancestor mask [n, n] allows (undefined = causal). Undefined when n == 1.
at::Tensor attention_mask(const at::Tensor& ancestor, int64_t start, int64_t n, const ComputeOptions& options);

// Checks an ancestor mask: [n, n], true on the diagonal. Throws Error.
void check_ancestor_mask(const at::Tensor& mask, int64_t n);

// One decoder layer over h [n, d]: attention (writing k/v to cache layer `layer`, rows [start, start + n)) and
// SwiGLU MLP (or mixture of experts), both residual. cos/sin from RotaryEmbedding::at_positions. input_norm = false
// skips the attention RMSNorm (EAGLE's head layer has none). experts_read: see mixture_of_experts.h.
// attention_input, when defined, is what q/k/v read instead of (normed) h, [n, wqkv's input width]; h stays the
// residual (EAGLE-3's layer: attention over [norm(embedding); norm(feature)], residual the raw feature).
// Returns the new hidden state.
at::Tensor llama_decoder_layer(const at::Tensor& h, const LlamaLayerWeights& weights, const ModelConfig& config,
                               KvCache& cache, int64_t layer, int64_t start, const at::Tensor& cos,
                               const at::Tensor& sin, const at::Tensor& mask, bool input_norm = true,
                               int64_t* experts_read = nullptr, const at::Tensor& attention_input = {});

}  // namespace draftlab
