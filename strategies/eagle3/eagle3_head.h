// Eagle3Head - the EAGLE-3 draft head (EAGLE-3 paper section 3; ../shared/papers/eagle3-spec.md sections 1-3).
//
// Inputs per row: a token t and a hidden vector u. On a committed row u = fc(G), G = the target's residual stream
// entering three of its layers (low, middle, high; spec 1.1) side by side [3d]; on a draft row u = the parent's
// state (already d wide: no fc).
//   e = embed(t)                                   the target's embedding (not stored in the head)
//   c = [input_layernorm(e) ; hidden_norm(u)]      [2d], embedding first, each half its own RMSNorm
//   y = u + o_proj(attention(c))                   q/k/v read c; the residual is the RAW u
//   out = y + mlp(post_attention_layernorm(y))     SwiGLU
//   state = out                                    fed back raw as the next depth's u
//   logits = lm_head(norm(out))                    the head's own LM head over V_d draft tokens
// Draft index i is target id i + d2t[i] (an offset table, spec 1.5); logits() spreads the V_d logits over the
// target vocabulary with -inf elsewhere, so drafted tokens are target ids and the strategies stay unchanged.
// RoPE: the head config's rope_theta, 10000 when absent (never the target's; spec 1.6), half-split rotation.
// Positions: pair j (feature of position j, token t_{j+1}) at position j, as EagleHead's rows.
//
// Which layers: the official head reads the inputs of target layers 2, L/2 and L-3 (0-based; = the outputs of
// layers 1, L/2-1, L-4). A target with fewer than 7 layers has no three distinct such layers (spec pitfall 16);
// draftlab then uses the inputs of layers 1, L/2 and L-1 (repeating one when L < 4), and records the choice in
// config.json as "draftlab_feature_layers" (input-layer indices) for every head it writes; a head folder without
// that key gets eagle3_input_layers(L).
//
// EAGLE-3.1 (Eagle3HeadWeights::fc_norm, norm_output) is the same head with two changes, switched on by config.json.
//
// On disk (the official layout, spec 2.1): config.json (a Llama config with draft_vocab_size; num_hidden_layers is
// ignored, as the official code ignores it) and model.safetensors with exactly
//   fc.weight [d, 3d], midlayer.hidden_norm.weight, midlayer.input_layernorm.weight,
//   midlayer.post_attention_layernorm.weight, midlayer.self_attn.{q,k,v,o}_proj.weight (q/k/v over 2d),
//   midlayer.mlp.{gate,up,down}_proj.weight, norm.weight, lm_head.weight [V_d, d], d2t [V_d] int64, t2d [V] bool
// and, when config.json says "fc_norm": true (EAGLE-3.1), fc_norm.{0,1,2}.weight [d].
// Also accepted and ignored: embed_tokens.weight, *rotary_emb.inv_freq. d2t and t2d may be absent when V_d = V (the
// official loader deletes them then). Any other key is refused by name. Published heads ship pytorch_model.bin:
// `draftlab convert-head` turns one into this folder.
// Other writers' spellings, read too: SpecForge's export (architectures ["LlamaForCausalLMEagle3"], the feature
// layers as eagle_config.eagle_aux_hidden_state_layer_ids = the input layers - 1), tensor names with a leading
// "model." (vLLM, NeMo) or "layers.0." for "midlayer." (tools that save the layer as a list). save() writes the
// official names, both feature-layer keys and, for EAGLE-3.1, both flags explicitly (SpecForge before its PR 879
// read an absent norm_output as true).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/model_config.h"
#include "core/model/compute_options.h"
#include "core/model/feature_head.h"
#include "core/model/llama_model.h"
#include "core/model/llama_weights.h"
#include "core/model/rope.h"

namespace draftlab {

struct Eagle3HeadWeights {
  at::Tensor fc;           // [d, 3d], no bias
  at::Tensor input_norm;   // [d] midlayer.input_layernorm: the embedding half
  at::Tensor hidden_norm;  // [d] midlayer.hidden_norm: the feature half
  // The decoder layer, fused like the target's: wqkv [(H + 2 KVH) hd, 2d], wo, mlp_norm (post_attention_layernorm),
  // w_gate_up, w_down; attn_norm undefined (the two halves' norms above replace it).
  LlamaLayerWeights layer;
  at::Tensor norm;     // [d] final norm
  at::Tensor lm_head;  // [V_d, d]
  // EAGLE-3.1 (config.json "fc_norm": true / "norm_output": true; vLLM's and SpecForge's meaning, after its PR 879):
  // fc_norm: three [d] RMSNorms, one per target feature (low, middle, high), applied before fc; empty for EAGLE-3.
  // norm_output: the state a row hands on (fed back as the next depth's u) is norm(out), the vector the LM head
  // reads, instead of the raw out; the LM head then reads it as it is (no second norm).
  std::vector<at::Tensor> fc_norm;
  bool norm_output = false;
};

// The fc input of target features G [..., 3d]: G itself, or with fc_norm each d-wide feature RMS-normed by its own
// weight (rms_norm's arithmetic; the reference path and the trainer).
at::Tensor eagle3_fc_input(const at::Tensor& features, const Eagle3HeadWeights& weights, double eps);

// The official layer choice as input-layer indices {2, L/2, L-3} for L >= 7; {1, L/2, L-1} (at least 1) below.
std::vector<int64_t> eagle3_input_layers(int64_t target_layers);

// Whether a head folder's config.json is an EAGLE-3 head's: third-party uploads name the architecture; the official
// config is a Llama config with draft_vocab_size (which draftlab's EAGLE-1/2 heads only carry beside their own
// draftlab_eagle_input key); draftlab's own also carries draftlab_feature_layers.
bool is_eagle3_config(const nlohmann::json& config);

class Eagle3Head : public FeatureHead {
 public:
  // config: the head's shape (hidden_size and vocab_size the target's). draft_ids [V_d] int64: the target id of
  // each draft index (ascending, unique, in range); undefined: the full vocabulary. input_layers: three target
  // layers whose inputs are the features (each in [1, L]). Throws Error on any mismatch.
  Eagle3Head(ModelConfig config, Eagle3HeadWeights weights, const LlamaModel& target, at::Tensor draft_ids,
             std::vector<int64_t> input_layers, WeightStorage stored = WeightStorage::Float32);

  // A head folder (config.json + model.safetensors) or a .safetensors file with config.json beside it. Throws
  // Error naming the file and field or tensor: missing or unknown keys, shapes, d2t/t2d that disagree.
  static std::unique_ptr<Eagle3Head> load(const std::string& path, const LlamaModel& target);

  // The config of a head for `target`: one dense layer of its shape, RoPE theta 10000 without scaling.
  static ModelConfig config_for(const ModelConfig& target);
  // A random head: projections normal(0, 0.02), norms 1. draft_vocab 0: the full vocabulary; else that many
  // distinct target ids drawn from the seed, or draft_ids when given (ascending target ids). input_layers: the
  // three target layers whose inputs it reads (empty: eagle3_input_layers). Deterministic in seed.
  // eagle31: an EAGLE-3.1 head (fc_norm weights 1, norm_output).
  static std::unique_ptr<Eagle3Head> random(const LlamaModel& target, uint64_t seed, int64_t draft_vocab = 0,
                                            at::Tensor draft_ids = {}, std::vector<int64_t> input_layers = {},
                                            bool eagle31 = false);

  // Writes config.json and model.safetensors (the official 15 keys, and fc_norm.* for EAGLE-3.1) in file_dtype
  // (float32/float16/bfloat16).
  void save(const std::string& dir, at::ScalarType file_dtype = at::kFloat) const;
  // The tensor names of a head file, in file order.
  static std::vector<std::string> checkpoint_keys();

  KvCache make_cache(int64_t capacity) const override;
  // Each sequence's features are [n, 3d] (target features: fc applies) or [n, d] (states).
  std::vector<at::Tensor> forward_batch(const std::vector<Rows>& sequences) const override;
  at::Tensor logits(const at::Tensor& states) const override;
  // The logits over the draft vocabulary [n, V_d] float32 (column i is target id draft_ids()[i]).
  at::Tensor draft_logits(const at::Tensor& states) const;

  std::vector<int64_t> target_feature_layers() const override;  // input layers - 1: ForwardOptions' indices
  const LlamaModel& target() const override { return target_; }

  const ModelConfig& config() const { return config_; }
  const Eagle3HeadWeights& weights() const { return weights_; }
  const std::vector<int64_t>& input_layers() const { return input_layers_; }
  // [V_d] int64 CPU target ids; undefined for a full-vocabulary head.
  const at::Tensor& draft_ids() const { return draft_ids_; }
  int64_t draft_vocab_size() const { return weights_.lm_head.size(0); }
  int64_t num_parameters() const;
  // EAGLE-3.1: fc_norm or norm_output.
  bool is_eagle31() const { return !weights_.fc_norm.empty() || weights_.norm_output; }

 private:
  at::Tensor reference_run(const Rows& rows) const;
  std::vector<at::Tensor> native_run(const std::vector<Rows>& sequences) const;
  void check_rows(const Rows& rows, const char* what) const;

  struct Native {
    PackedMatrix fc, lm_head;
    std::vector<float> input_norm, hidden_norm, norm;
    std::vector<std::vector<float>> fc_norm;
    NativeLayerWeights layer;
    std::mutex mutex;  // one forward at a time: the buffers are shared
    NativeWorkspace ws;
    std::vector<float> fc_in, embedded, attention_in;
  };

  ModelConfig config_;
  Eagle3HeadWeights weights_;
  const LlamaModel& target_;
  at::Tensor draft_ids_, draft_ids_device_;
  std::vector<int64_t> input_layers_;
  RotaryEmbedding rope_;
  std::unique_ptr<Native> native_;
};

}  // namespace draftlab
