// P-EAGLE's draft (parallel EAGLE, arXiv 2602.01469; SpecForge's PEagleDraftModel, specforge/modeling/draft/peagle.py;
// ../shared/papers/parallel-drafters-spec.md 1.1): the EAGLE-3 head (eagle3_head.h) with N decoder layers, drafting
// K tokens in ONE forward. Rows:
//   a pair j (committed): token t_{j+1} and the target's fused feature G_j [3d] (three layers' inputs side by side),
//                         at position j, as EAGLE-3's rows
//   a mask slot k >= 1:   the mask id's embedding and mask_hidden [3d] (learned) in place of G, at position root + k
//   layer 0   u = fc(G); c = [input_layernorm(embed(t)); hidden_norm(u)] [2d]; y = u + o_proj(attention(c));
//             out = y + mlp(post_attention_layernorm(y))                  (EAGLE-3's layer: the residual is raw u)
//   layer l   a plain pre-norm decoder layer over d
//   logits    lm_head(norm(out)) over the V_d draft tokens (d2t / t2d as EAGLE-3)
// Attention: every pair sees the pairs before it (causal); a mask slot sees every pair up to its root and the slots
// of its own rollout before it. Drafting after a committed prefix is one forward over the pairs not yet cached, the
// root pair last, then K - 1 mask slots: the root's row gives token 1, slot k's row token k + 1 (a chain). The pairs'
// keys and values stay cached; the slots' are dropped. Training (peagle_training.h) flattens many (anchor, depth)
// rollouts of a window into one forward of the same function with a mask.
//
// The token embedding is the target's (frozen) unless the head carries its own (`embed_tokens.weight`, trained with
// train-head --train-embedding 1, as SpecForge does): the mask id is a token absent from the training data, and the
// learned mask_hidden gives the slots their learned input either way.
//
// Folder (SpecForge's `--to hf` layout): config.json (architectures ["PEagleDraftModel"], a Llama config with
// num_hidden_layers N, draft_vocab_size, mask_token_id and pard_token (the name vLLM's parallel drafting reads), and
// draftlab's keys draftlab_feature_layers and draftlab_num_depths) and model.safetensors: fc.weight [d, 3d],
// mask_hidden [1, 1, 3d], layers.0.{input_layernorm, hidden_norm, self_attn.{q,k,v}_proj (over 2d), self_attn.o_proj,
// post_attention_layernorm, mlp.{gate,up,down}_proj}.weight, layers.l.{the same without hidden_norm, q/k/v over d},
// norm.weight, lm_head.weight [V_d, d], d2t, t2d, optionally embed_tokens.weight [V, d].
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

struct PEagleConfig {
  ModelConfig layers;                 // the N draft layers: the target's width, heads and vocabulary
  int64_t mask_token = -1;            // the mask slots' token id
  int64_t depths = 4;                 // K: tokens per forward it was trained for (its default draft length)
  std::vector<int64_t> input_layers;  // the three target layers whose inputs are fused (EAGLE-3's choice)
};

// True for a PEagleDraftModel config.json.
bool is_peagle_config(const nlohmann::json& config);

struct PEagleLayerWeights {
  at::Tensor input_norm;   // [d] input_layernorm (layer 0: the embedding half's)
  at::Tensor hidden_norm;  // [d] layer 0 only: the feature half's norm; undefined in later layers
  at::Tensor wq, wk, wv;   // [heads hd, 2d] in layer 0, [heads hd, d] after
  at::Tensor wo, mlp_norm, w_gate, w_up, w_down;
};
struct PEagleWeights {
  at::Tensor embed;        // [V, d] the head's own embedding; undefined: the target's
  at::Tensor fc;           // [d, 3d]
  at::Tensor mask_hidden;  // [3d]
  std::vector<PEagleLayerWeights> layers;
  at::Tensor norm;     // [d]
  at::Tensor lm_head;  // [V_d, d]
};

// Rows through the layers: embeddings [B, Q, d] and fused inputs [B, Q, 3d] (a pair's G or mask_hidden) at positions
// [Q]; each layer's cached keys / values [B, C, KVH, hd] first (empty vectors: none), mask [Q, C + Q] additive
// (0 = visible). Each layer's new keys / values [B, Q, KVH, hd] go to new_keys / new_values when given. Returns the
// raw outputs [B, Q, d]. Differentiable: training and inference run this one function.
at::Tensor peagle_rows(const PEagleConfig& config, const PEagleWeights& weights, const RotaryEmbedding& rope,
                       const at::Tensor& embeddings, const at::Tensor& fused, const at::Tensor& positions,
                       const std::vector<at::Tensor>& past_keys, const std::vector<at::Tensor>& past_values,
                       const at::Tensor& mask, std::vector<at::Tensor>* new_keys, std::vector<at::Tensor>* new_values,
                       const LinearProjection& project = {});

class PEagleHead {
 public:
  // draft_ids [V_d] int64: the target id of each draft index (ascending); undefined: the full vocabulary.
  PEagleHead(PEagleConfig config, PEagleWeights weights, at::Tensor draft_ids, const LlamaModel& target);

  // A folder for `target`. Throws Error naming the file and field or tensor.
  static std::unique_ptr<PEagleHead> load(const std::string& path, const LlamaModel& target);
  // Random weights (tests): `layers` layers, K = depths, mask id (-1: the highest id), the full vocabulary.
  static std::unique_ptr<PEagleHead> random(const LlamaModel& target, uint64_t seed, int64_t layers = 2,
                                            int64_t depths = 4, int64_t mask_token = -1);
  // The config of a head of `layers` layers for `target` (RoPE theta 10000 as EAGLE-3's, no scaling).
  static ModelConfig config_for(const ModelConfig& target, int64_t layers);
  // Writes config.json and model.safetensors (float32, float16 or bfloat16) into the existing folder `dir`.
  void save(const std::string& dir, at::ScalarType file_dtype) const;

  const PEagleConfig& config() const { return config_; }
  const PEagleWeights& weights() const { return weights_; }
  const at::Tensor& draft_ids() const { return draft_ids_; }  // [V_d] int64 CPU; undefined: the full vocabulary
  const LlamaModel& target() const { return target_; }
  const RotaryEmbedding& rope() const { return rope_; }
  // The target layers whose outputs the strategy asks the verifier for (the input layers - 1).
  std::vector<int64_t> target_feature_layers() const;

  // The keys / values of the cached pairs per layer [1, capacity, KVH, hd], `length` pairs (positions 0..length-1).
  struct Cache {
    std::vector<at::Tensor> keys, values;
    int64_t length = 0;
  };
  Cache make_cache(int64_t capacity) const;
  // One draft forward: the pairs (tokens[i], features[i] [n, 3d]) at positions cache.length + i, the last one the
  // root, then depth - 1 mask slots. The pairs join the cache. Returns the logits over the target vocabulary
  // [depth, V] float32 (-inf outside the draft vocabulary): row 0 the root's, row k mask slot k's. Throws Error past
  // the capacity.
  at::Tensor draft(Cache& cache, const std::vector<int64_t>& tokens, const at::Tensor& features, int64_t depth) const;

 private:
  PEagleConfig config_;
  PEagleWeights weights_;
  at::Tensor draft_ids_;
  const LlamaModel& target_;
  RotaryEmbedding rope_;
  PackedProjections projections_;  // every projection and the LM head, for the native kernels
};

}  // namespace draftlab
