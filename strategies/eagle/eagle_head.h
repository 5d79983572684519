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
// Published heads ship pytorch_model.bin: `draftlab convert-head IN.bin OUT_DIR` turns one into such a folder (keys
// unchanged; core/model/torch_checkpoint.h).
//
// Input variants (EAGLE paper 4.3.2, Figure 8), recorded in config.json as "draftlab_eagle_input". Head row i
// always predicts f_{i+1}; what it reads differs:
//   feature_shifted_token    (t_{i+1}, f_i)  EAGLE: the token sampled from f_i resolves the sampling randomness
//   feature_unshifted_token  (t_i, f_i)      the token that produced f_i: siblings in a draft tree get one prediction
//   feature_only             f_i
//   token_only               t_{i+1}          a one-layer token LM on the target's frozen embedding and LM head
// The two-input variants keep the official fc [d, 2d] over concat(embed, feature). The one-input variants use
// fc [d, d] (with bias) over that one input: the paper keeps the rest of the architecture identical and uses the
// FC only to reduce the concatenated width; we keep a d -> d fc anyway so that every variant has the same keys
// and the same trainable pieces (for token_only it is the only trainable map on the frozen embedding before the
// attention). forward() always takes a token and a feature per row; a variant ignores what it does not read, and
// the caller (EagleDrafter, HeadTrainingModel) passes the token the variant reads (eagle_row_token_is_unshifted).
//
// Reduced draft vocabulary (FR-Spec, EAGLE-3): config.json "draft_vocab_size": K and a tensor d2t [K] int64 in
// model.safetensors holding the target ids of the draft vocabulary (unique, each in [0, vocab)). The head's
// logits are then the target LM head's rows for those ids only, gathered once at construction: a draft step
// costs K * d instead of vocab * d. logits() still returns [n, vocab] with -inf outside the draft vocabulary,
// so drafted tokens stay target ids and every strategy (and the verifier's q) works unchanged; the softmax over
// that row is the softmax over the reduced vocabulary.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/io/model_config.h"
#include "core/model/compute_options.h"
#include "core/model/feature_head.h"
#include "core/model/kv_cache.h"
#include "core/model/llama_model.h"
#include "core/model/llama_weights.h"
#include "core/model/rope.h"

namespace draftlab {

// What the head takes as input (see above). The name is recorded in config.json ("draftlab_eagle_input").
inline constexpr const char* kEagleInputFeatureShiftedToken = "feature_shifted_token";
inline constexpr const char* kEagleInputFeatureUnshiftedToken = "feature_unshifted_token";
inline constexpr const char* kEagleInputFeatureOnly = "feature_only";
inline constexpr const char* kEagleInputTokenOnly = "token_only";

// Every known variant name; comma-separated (for messages).
std::vector<std::string> eagle_input_variants();
std::string eagle_input_names();
bool is_eagle_input(const std::string& variant);
// Width of fc's input: 2d for the two-input variants, d for the one-input ones.
int64_t eagle_fc_input_width(const std::string& variant, int64_t hidden_size);
// True when head row i reads t_i (feature_unshifted_token) rather than t_{i+1}.
bool eagle_row_token_is_unshifted(const std::string& variant);
// fc's input for a variant: concat(embedding, feature) (embedding first), the embedding, or the feature. Shapes
// [..., d] -> [..., fc width]; shared by the inference head and the training forward.
at::Tensor eagle_fc_input(const std::string& variant, const at::Tensor& embedded, const at::Tensor& features);

struct EagleHeadWeights {
  at::Tensor fc;       // [d, 2d] column-major: input = concat(embedding, feature); [d, d] for one-input variants
  at::Tensor fc_bias;  // [d], undefined for a bias-free fc
  // The single decoder layer, fused like the target's (wqkv, w_gate_up); attn_norm is undefined (no input norm).
  LlamaLayerWeights layer;
};

class EagleHead : public FeatureHead {
 public:
  // config: the head's own shape (num_hidden_layers must be 1). `target` supplies embedding and LM head and must
  // outlive the head. Compute options (device, dtype) are the target's.
  // d2t: the draft vocabulary's target ids [K] int64 (undefined = the full vocabulary). Throws Error on an unknown
  // variant, an fc of the wrong width for it, or d2t ids out of range or repeated.
  // stored: how the head's checkpoint stores its weights; the native path keeps that storage unless the target's
  // options name one (ComputeOptions::weights).
  EagleHead(ModelConfig config, EagleHeadWeights weights, const LlamaModel& target,
            std::string input_variant = kEagleInputFeatureShiftedToken, at::Tensor d2t = {},
            WeightStorage stored = WeightStorage::Float32);

  // Loads a head folder (config.json + model.safetensors) or a .safetensors file with config.json beside it.
  // Throws Error naming the file and field: missing/unexpected tensors, wrong shapes, and a hidden or vocabulary
  // size that differs from the target's (both values named).
  static std::unique_ptr<EagleHead> load(const std::string& path, const LlamaModel& target);

  // A randomly initialised head for `target` (for when no trained head exists): the target's shape with one
  // layer; projections normal(0, 0.02) as Hugging Face initialises, norm weights 1, fc bias 0. Deterministic in
  // seed. Useless as a drafter, but any head must keep decoding lossless, which is what tests check with it.
  // A variant other than the default draws fc [d, d] for the one-input variants (the two-input ones draw exactly
  // what the default draws). d2t as in the constructor.
  // The config of a head for `target`: one dense decoder layer of the target's shape (of its expert width for a
  // mixture of experts, as the official Mixtral head), an untied LM head.
  static ModelConfig config_for(const ModelConfig& target);

  static std::unique_ptr<EagleHead> random(const LlamaModel& target, uint64_t seed,
                                           const std::string& input_variant = kEagleInputFeatureShiftedToken,
                                           at::Tensor d2t = {});

  // Writes a head folder in file_dtype (float32/float16/bfloat16): config.json and model.safetensors.
  void save(const std::string& dir, at::ScalarType file_dtype = at::kFloat) const;

  // The exact tensor names of a head checkpoint (the published layout above), in file order.
  // (with_d2t: a reduced-vocabulary head, which adds "d2t" last.)
  static std::vector<std::string> checkpoint_keys(bool fc_bias = true, bool with_d2t = false);

  KvCache make_cache(int64_t capacity) const override;

  // FeatureHead::forward_batch: each sequence's rows are pairs (token t_{i+1}, feature f_i) and its states the
  // predicted next features [n, d] (compute dtype).
  std::vector<at::Tensor> forward_batch(const std::vector<Rows>& sequences) const override;

  // Next-token logits [n, vocab] float32 from predicted features [n, d], through the target's LM head (only its
  // draft-vocabulary rows for a reduced head; -inf in the other columns).
  at::Tensor logits(const at::Tensor& predicted_features) const override;
  // Logits over the draft vocabulary only [n, K] float32 (column j is target id d2t[j]); == logits() for a
  // full-vocabulary head.
  at::Tensor draft_logits(const at::Tensor& predicted_features) const;

  const ModelConfig& config() const { return config_; }
  const EagleHeadWeights& weights() const { return weights_; }
  const std::string& input_variant() const { return input_variant_; }
  // The draft vocabulary's target ids [K] int64 on the CPU; undefined for a full-vocabulary head.
  const at::Tensor& d2t() const { return d2t_; }
  int64_t draft_vocab_size() const { return d2t_.defined() ? d2t_.size(0) : config_.vocab_size; }
  const ComputeOptions& options() const { return target_.options(); }
  const LlamaModel& target() const override { return target_; }
  bool reads_unshifted_token() const override { return eagle_row_token_is_unshifted(input_variant_); }
  int64_t num_parameters() const;

 private:
  at::Tensor reference_run(KvCache& cache, const at::Tensor& tokens, const at::Tensor& features,
                           const at::Tensor& positions, const at::Tensor& visible) const;
  std::vector<at::Tensor> native_run(const std::vector<Rows>& sequences) const;

  // The head on the native CPU path (present when the target runs there): packed fc, layer and reduced LM head.
  struct Native {
    PackedMatrix fc;
    std::vector<float> fc_bias;
    NativeLayerWeights layer;
    PackedMatrix draft_lm_head;  // empty for a full-vocabulary head (the target's packed LM head is used)
    std::mutex mutex;            // one forward at a time: the workspace is shared
    NativeWorkspace ws;
    std::vector<float> fc_input;
  };

  ModelConfig config_;
  EagleHeadWeights weights_;
  const LlamaModel& target_;
  std::string input_variant_;
  at::Tensor d2t_;              // [K] int64 CPU, undefined = full vocabulary
  at::Tensor d2t_device_;       // the same on the compute device (scatter index)
  at::Tensor draft_lm_head_;    // [K, d] the target LM head's rows for d2t, column-major; undefined = full
  RotaryEmbedding rope_;
  std::unique_ptr<Native> native_;
};

}  // namespace draftlab
