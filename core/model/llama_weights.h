// LlamaWeights - the tensors of a Llama-family model, laid out for a fast forward:
// q/k/v projections fused into one [(H + 2 KVH) * head_dim, d] matrix and gate/up into one [2 I, d] matrix,
// so each layer runs 4 matrix products instead of 7. Loading and saving translate to/from Hugging Face names.
//
// Projection matrices (and the LM head) are stored column-major: logically [out, in], physically [in, out]
// (a transposed view of contiguous storage). OpenBLAS's GEMV and its small-m GEMM are both markedly faster on
// that layout (bench/forward_cost measures it), and decoding is made of exactly those calls.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/io/model_config.h"
#include "core/io/tensor_entry.h"
#include "core/model/compute_options.h"

namespace draftlab {

struct LlamaLayerWeights {
  at::Tensor attn_norm;  // [d]                      input_layernorm
  at::Tensor wqkv;       // [(H + 2 KVH) * hd, d]    q_proj ; k_proj ; v_proj
  at::Tensor wo;         // [d, H * hd]              o_proj
  at::Tensor mlp_norm;   // [d]                      post_attention_layernorm
  at::Tensor w_gate_up;  // [2 I, d]                 gate_proj ; up_proj          (dense MLP only)
  at::Tensor w_down;     // [d, I]                   down_proj                    (dense MLP only)
  // Mixture of experts (config.mixture_of_experts()): a router and E SwiGLU experts replace w_gate_up / w_down.
  at::Tensor router;                       // [E, d]     block_sparse_moe.gate
  std::vector<at::Tensor> expert_gate_up;  // E x [2 I, d]   block_sparse_moe.experts.j.w1 ; .w3
  std::vector<at::Tensor> expert_down;     // E x [d, I]     block_sparse_moe.experts.j.w2
};

struct LlamaWeights {
  at::Tensor embed;  // [vocab, d]
  std::vector<LlamaLayerWeights> layers;
  at::Tensor norm;     // [d]
  at::Tensor lm_head;  // [vocab, d] column-major; a column-major copy of embed when tie_word_embeddings
};

// The same values in column-major storage (see above). Idempotent.
at::Tensor column_major(const at::Tensor& matrix);

// Puts every projection and the LM head into column-major storage.
void use_column_major(LlamaWeights& weights);
void use_column_major(LlamaLayerWeights& layer);  // one layer's projections

// Finds a checkpoint tensor by Hugging Face name (nullptr if absent).
using TensorLookup = std::function<const TensorEntry*(const std::string& name)>;

// Builds the weights from checkpoint tensors, checking every shape against the config (a mismatch is an Error
// naming file, tensor, expected and actual shape). `rope_pairs` = the checkpoint rotates consecutive pairs
// (llama2.c / Meta layout): q and k rows are permuted to the halves convention.
// `source` names the checkpoint in "tensor not found" errors.
// `on_layer`, when given, sees each layer as soon as it is built (row-major), before the next is read: the native
// path packs it there and may drop its tensors, so a whole float32 copy of the model never exists; projections it
// keeps are then made column-major. With a sink the LM head is left as read (tied: the embedding tensor itself), for
// the caller to pack and to make column-major if it keeps it.
using LayerSink = std::function<void(LlamaLayerWeights& layer)>;
LlamaWeights load_llama_weights(const ModelConfig& config, const TensorLookup& lookup, bool rope_pairs,
                                const std::string& source, const ComputeOptions& options,
                                const LayerSink& on_layer = {});

// Random weights (normal, std 0.02; norms at 1) for benchmarks and tests. Deterministic for a seed.
LlamaWeights random_llama_weights(const ModelConfig& config, uint64_t seed, const ComputeOptions& options);

// The tensors under Hugging Face names, split back out of the fused matrices, contiguous on CPU in `dtype`.
std::vector<std::pair<std::string, at::Tensor>> hf_named_tensors(const ModelConfig& config,
                                                                 const LlamaWeights& weights, at::ScalarType dtype);

}  // namespace draftlab
