// DFlash's draft (z-lab/dflash, dflash/model.py; arXiv 2602.06036): n decoder layers without an embedding or LM head
// of their own (the target's). The target's outputs of a few layers (dflash_config.target_layer_ids), side by side,
// go through fc and hidden_norm once per position and are injected as keys and values into every draft layer
// (k_proj / v_proj of that layer, k_norm, RoPE at the position). A block of B slots (slot 0: the last committed
// token, slots 1..B-1: the mask id) is embedded by the target's embedding and runs through the layers, each slot
// attending to the whole context and to every slot of its block (no causal mask); the target's LM head on the
// normed slots 1..B-1 gives B - 1 draft distributions in one forward.
//
// At inference the context keys and values are a cache of the committed positions: a block at sequence position p
// (its slot 0) sees the features of positions < p, the last one's features arriving with the verification that
// committed it. Training (dflash_training.h) runs the same functions over many blocks of a window at once, each
// block's mask hiding the context at and after its anchor.
//
// Folder (z-lab's layout, which llama.cpp's DFlash conversion reads): config.json (architectures
// ["DFlashDraftModel"], Qwen3 fields, block_size, num_target_layers, dflash_config.{mask_token_id,
// target_layer_ids}) and model.safetensors (fc, hidden_norm, layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
// self_attn.{q,k}_norm, post_attention_layernorm, mlp.{gate,up,down}_proj}, norm).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/io/model_config.h"
#include "core/model/llama_model.h"
#include "core/model/rope.h"
#include "core/model/packed_projections.h"

namespace draftlab {

struct DFlashConfig {
  ModelConfig layers;  // the draft's layers: hidden_size and vocab_size are the target's
  int64_t block_size = 8;
  int64_t mask_token = -1;
  std::vector<int64_t> target_layer_ids;  // 0-based target layers whose outputs feed fc
  int64_t num_target_layers = 0;
};

// z-lab's build_target_layer_ids for `count` feature layers of a target of L layers: evenly from 1 to L - 3
// (count 1: L / 2).
std::vector<int64_t> dflash_target_layer_ids(int64_t num_target_layers, int64_t count);

// True for a DFlashDraftModel config.json.
bool is_dflash_config(const nlohmann::json& config);

struct DFlashLayerWeights {
  at::Tensor attn_norm, wq, wk, wv, wo, q_norm, k_norm, mlp_norm, w_gate, w_up, w_down;  // [out, in] row-major
};
struct DFlashWeights {
  at::Tensor fc;           // [d, k d]
  at::Tensor hidden_norm;  // [d]
  std::vector<DFlashLayerWeights> layers;
  at::Tensor norm;         // [d]
};

// The context keys and values of target features [B, n, k d] at positions [n]: per layer [B, n, KVH, hd] (keys after
// k_norm and RoPE). Differentiable (training) and the inference cache's rows alike.
void dflash_context(const DFlashConfig& config, const DFlashWeights& weights, const RotaryEmbedding& rope,
                    const at::Tensor& features, const at::Tensor& positions, std::vector<at::Tensor>& keys,
                    std::vector<at::Tensor>& values, const LinearProjection& project = {});

// Blocks through the layers: slot embeddings [B, Q, d] at positions [Q], each layer's context keys / values
// [B, C, KVH, hd]; mask [Q, C + Q] additive (0 = visible; undefined: everything visible). Returns the normed
// hidden states [B, Q, d].
at::Tensor dflash_blocks(const DFlashConfig& config, const DFlashWeights& weights, const RotaryEmbedding& rope,
                         const at::Tensor& embeddings, const at::Tensor& positions,
                         const std::vector<at::Tensor>& context_keys, const std::vector<at::Tensor>& context_values,
                         const at::Tensor& mask, const LinearProjection& project = {});

class DFlashHead {
 public:
  DFlashHead(DFlashConfig config, DFlashWeights weights, const LlamaModel& target);

  // A trained folder for `target`. Throws Error naming the file and field or tensor.
  static std::unique_ptr<DFlashHead> load(const std::string& path, const LlamaModel& target);
  // Random weights (tests): n layers, block size, mask id (-1: the highest id), the target's 5 feature layers.
  static std::unique_ptr<DFlashHead> random(const LlamaModel& target, uint64_t seed, int64_t layers = 1,
                                            int64_t block_size = 8, int64_t mask_token = -1);
  // Writes config.json and model.safetensors (float32, float16 or bfloat16) into the existing folder `dir`.
  void save(const std::string& dir, at::ScalarType file_dtype) const;

  const DFlashConfig& config() const { return config_; }
  const DFlashWeights& weights() const { return weights_; }
  const LlamaModel& target() const { return target_; }
  const RotaryEmbedding& rope() const { return rope_; }

  // The context cache of one sequence: keys / values per layer [1, capacity, KVH, hd], `length` rows in use.
  struct Context {
    std::vector<at::Tensor> keys, values;
    int64_t length = 0;
  };
  Context make_context(int64_t capacity) const;
  // Appends the features [n, k d] of the next n positions. Throws Error past the capacity.
  void extend(Context& context, const at::Tensor& features) const;
  // The draft logits [B - 1, vocab] (float32) of a block: `token` at position context.length (its slot 0), then
  // B - 1 mask slots.
  at::Tensor draft(const Context& context, int64_t token, int64_t block) const;

 private:
  DFlashConfig config_;
  DFlashWeights weights_;
  const LlamaModel& target_;
  RotaryEmbedding rope_;
  PackedProjections projections_;  // every projection, for the native kernels
};

}  // namespace draftlab
