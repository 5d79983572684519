// Mixture-of-experts MLP (Mixtral): a router scores E SwiGLU experts per row; each row goes through its k best.
//
// The rule every path follows (reference, training, native, and the tests' naive loop):
//   p = softmax(x · routerᵀ) in float32; the k most probable experts (ties to the lower index);
//   their probabilities renormalised to sum to 1 (Mixtral's routing_weights /= sum);
//   out = Σ over the chosen experts in ascending expert index of weight_e · expert_e(x),
//   expert_e(x) = down_e(silu(gate_e x) ⊙ up_e x).
// Each row routes on its own, so a row's output does not depend on which other rows share the call: a draft tree
// verifies with the arithmetic of decoding its tokens one by one. Rows that pick the same expert share one pass
// over its weights - which is why verifying n tokens reads more experts than decoding one (EAGLE Table 3).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "core/io/model_config.h"
#include "core/model/llama_weights.h"

namespace draftlab {

// x · wᵀ for a weight [out, in] (the caller's product: project() for inference, matmul for training).
using Projection = std::function<at::Tensor(const at::Tensor& x, const at::Tensor& w)>;

// The MoE MLP over x [rows, d] (already normed). router_logits, when given, receives x · routerᵀ [rows, E] (the
// training loss's load balancing reads it); experts_read, when given, is increased by the number of distinct
// experts this call ran. Differentiable (autograd flows through the routing weights and the experts).
at::Tensor mixture_of_experts(const at::Tensor& x, const LlamaLayerWeights& layer, const ModelConfig& config,
                              const Projection& project, at::Tensor* router_logits = nullptr,
                              int64_t* experts_read = nullptr);

// The routing rule on host buffers: logits [rows, E] -> experts [rows, k] (ascending index within a row) and their
// renormalised weights [rows, k]. The native path's routing.
void route_rows(const float* logits, int64_t rows, int64_t num_experts, int64_t k, int32_t* experts, float* weights);

// Switch Transformer's load-balancing loss as Hugging Face's Mixtral computes it (load_balancing_loss_func): over
// all layers' router logits [rows, E], E · Σ_e (fraction of (row, slot) choices that picked e) · (mean router
// probability of e). Equals k when the routing is perfectly uniform.
at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t num_experts, int64_t k);

}  // namespace draftlab
