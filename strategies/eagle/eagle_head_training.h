// Training an EAGLE draft head for a frozen target (EAGLE paper section 3.2; SafeAILab/EAGLE train/main.py).
//
// Data: windows w_0..w_T of T + 1 corpus tokens. The frozen target (no gradient) gives the features f_0..f_T
// (its final normed hidden states, LlamaModel::forward's `features`) and its next-token distributions
// p_i = softmax(lm_head(f_i)). The head sees at position i (0..T-1, RoPE position i, causal) the pair
// (w_{i+1}, f_i + U(-0.1, 0.1) noise) and predicts f^_{i+1}:
//   loss = SmoothL1(f^_{i+1}, f_{i+1}) + 0.1 * CE(p_{i+1}, log_softmax(lm_head(f^_{i+1})))   (soft cross-entropy)
// Validation (no noise): the same loss and the top-1 accuracy argmax lm_head(f^) == argmax lm_head(f).
//
// Input variants (eagle_head.h): row i reads (w_{i+1}, f_i) for feature_shifted_token (above), (w_i, f_i) for
// feature_unshifted_token, f_i for feature_only, w_{i+1} for token_only; the target of every row is f_{i+1}.
//
// Reduced draft vocabulary (--draft-vocab K): the K most frequent tokens of the run's training windows (ties to the
// lower id), sorted by id, become the head's d2t. The head's logits are lm_head restricted to those rows, and the
// soft CE is taken against the target's distribution restricted to the kept ids and renormalised (the softmax of
// the target's logits at those ids): the best the head can do over its vocabulary. SmoothL1 is unchanged. Top-1
// accuracy still compares target ids (a target argmax outside the draft vocabulary is a miss).
//
// Chain acceptance n-alpha (EAGLE paper Table 2, Figure 8), measured on the validation windows: from every head
// row i (true features f_0..f_i), the head rolls out n more rows i+1..i+n that read its OWN predicted features
// f^_{i+1}..f^_{i+n} (each from the previous rollout row; tokens still from the window, as a chain draft whose
// earlier tokens were all accepted), and its prediction at step n is argmax lm_head(f^_{i+n+1}) (over the draft
// vocabulary), compared with the target's argmax lm_head(f_{i+n+1}). n-alpha = the fraction that agree at step n
// among the start rows that agreed at steps 0..n-1 (and whose steps all lie inside the window and are unmasked).
// 0-alpha is the top-1 accuracy; n >= 1 measures how the head copes with its own feature errors. On windows the
// target generated greedily (token = the target's argmax), this is exactly chain-draft acceptance at T = 0.
// Beside it, the official code's definition (train/main.py getkacc), logged as eval/alpha_official: from each
// start row, steps continue while the row counts and its window token is the target's greedy choice (there the
// official loop's fed token, the head's own argmax after agreeing, is the window's token, so one rollout serves
// both); step n counts a try, and a hit when it agrees; a start that misses at step n also counts a try at every
// later step. So it is cumulative, P(steps 0..n all agree), and not comparable with the conditional n-alpha above.
//
// Training runs through the pipeline every head family shares (head_training.h: data, features, feature cache,
// Trainer, checkpoints, resume, log); HeadTrainingModel is the EAGLE family's TrainableHead. DIR after a run:
//   config.json, model.safetensors    the head, as EagleHead::save writes it (EagleHead::load reads it)
//   training_state.safetensors        parameters, AdamW moments, step, curves: --resume continues exactly
//   training_log.h5                   the loss curves, eval/accuracy and eval/alpha [passes, 5] (0..4-alpha)
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strategies/eagle/eagle_head.h"
#include "core/model/llama_model.h"
#include "core/training/feature_cache.h"
#include "core/training/head_training.h"
#include "core/training/text_dataset.h"
#include "core/training/trainer.h"

namespace draftlab {

// The head's trainable tensors (row-major [out, in] leaves) and the batched, differentiable head forward.
class HeadTrainingModel : public TrainableHead {
 public:
  // Starts from EagleHead::random(target, seed, input_variant, d2t) (d2t: the draft vocabulary's target ids, or
  // undefined for the full vocabulary).
  HeadTrainingModel(const LlamaModel& target, uint64_t seed,
                    std::string input_variant = kEagleInputFeatureShiftedToken, at::Tensor d2t = {});

  // Named leaves for the Trainer ("fc", "fc_bias", "layers.0.wqkv", ...).
  std::vector<std::pair<std::string, at::Tensor>> parameters() const override;

  // TrainableHead: the loss of a batch (noise from (seed, step); the soft CE weighted by cls_weight), validation
  // (loss, top-1 accuracy, n-alpha), the head folder.
  std::string family_name() const override { return "eagle"; }
  std::map<std::string, std::string> identity() const override;
  std::string identity_default(const std::string& key) const override;
  at::Tensor loss(const HeadBatch& batch, int64_t step) const override;
  HeadEvaluation evaluate(const HeadBatch& batch) const override;
  void save(const std::string& dir, at::ScalarType file_dtype) const override;
  void set_cls_weight(double weight) { cls_weight_ = weight; }
  // The official recipe's loss mask alignment and noise (EagleHeadTrainingOptions::recipe); clipping is the Trainer's.
  void set_official_recipe(bool official) { official_recipe_ = official; }

  // tokens [B, T] int64 (each row's token as the variant reads it: row_tokens()), features [B, T, d] ->
  // predicted next features [B, T, d]; positions 0..T-1, causal.
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& features) const;
  // The tokens rows 0..T-1 read, from windows [B, T + 1]: w_1..w_T, or w_0..w_{T-1} for feature_unshifted_token.
  at::Tensor row_tokens(const at::Tensor& windows) const;

  struct Loss {
    at::Tensor loss;            // scalar, with its graph
    double smooth_l1 = 0, soft_ce = 0;
    int64_t correct = 0, count = 0;  // top-1 agreement with the target
  };
  // windows [B, T + 1] int64. noise_seed < 0: no input noise (validation).
  // loss_mask (optional) [B, T + 1] bool/uint8 over the window tokens: head row i predicts f_{i+1}, i.e. the
  //   distribution of token w_{i+2}; the row counts (loss and accuracy) iff loss_mask[i + 2]. The last row's
  //   token w_{T+1} lies past the window, so it counts iff loss_mask[T] (the turn of the window's last token).
  //   Losses are then means over the counted rows (0 when none count). Undefined: every row counts, bit-identical
  //   to the unmasked code.
  // target_features (optional) [B, T + 1, d] float: the frozen target's features f_0..f_T of the windows (e.g.
  //   from a feature cache), used instead of running the target.
  // share (a part of a step, head_training.h): the windows are some rows of a step whose mask (after the
  //   recipe's rule) is share.step_mask; the losses are then sums over the whole step's count and the noise is the
  //   step's, cut to these rows.
  Loss loss(const at::Tensor& windows, int64_t noise_seed, double cls_weight = 0.1, const at::Tensor& loss_mask = {},
            const at::Tensor& target_features = {}, const StepShare& share = {}) const;

  static constexpr int kAlphaSteps = 5;  // 0-alpha .. 4-alpha
  struct ChainAcceptance {
    int64_t agreed[kAlphaSteps] = {};
    int64_t tried[kAlphaSteps] = {};
    int64_t official_hits[kAlphaSteps] = {};   // getkacc's correct[n]
    int64_t official_tries[kAlphaSteps] = {};  // getkacc's total[n]
    double alpha(int n) const { return tried[n] ? static_cast<double>(agreed[n]) / static_cast<double>(tried[n]) : 0.0; }
    ChainAcceptance& operator+=(const ChainAcceptance& o);
  };
  // n-alpha counts over windows [B, T + 1] (see the top of this file), through the inference head (to_head()).
  // loss_mask and target_features as in loss(); no noise.
  ChainAcceptance chain_acceptance(const at::Tensor& windows, const at::Tensor& loss_mask = {},
                                   const at::Tensor& target_features = {}) const;

  // Detached copies as an inference head (column-major, the target's compute options).
  std::unique_ptr<EagleHead> to_head() const;

  const ModelConfig& config() const { return config_; }
  const std::string& input_variant() const { return input_variant_; }
  const at::Tensor& d2t() const { return d2t_; }

 private:
  // The loss mask a batch is counted by (HeadBatch::mask, adjusted for the official rule on padded rows).
  at::Tensor batch_mask(const HeadBatch& batch) const;

  const LlamaModel& target_;
  uint64_t seed_ = 0;
  double cls_weight_ = 0.1;
  bool official_recipe_ = false;
  ModelConfig config_;
  RotaryEmbedding target_rope_, rope_;
  EagleHeadWeights w_;  // row-major leaves
  std::string input_variant_;
  at::Tensor d2t_;            // [K] int64 CPU, undefined = full vocabulary
  at::Tensor draft_lm_head_;  // lm_head rows of d2t [K, d] (undefined = full vocabulary)
};

// The EAGLE family's options, besides the ones every family shares.
struct EagleHeadTrainingOptions : HeadTrainingOptions {
  double cls_weight = 0.1;
  std::string input = kEagleInputFeatureShiftedToken;  // the head's input variant
  int64_t draft_vocab = 0;                              // K most frequent training tokens; 0 = full vocabulary
  // "paper" (default): the recipe documented at the top of this file. "official": as the official train/main.py:
  // input noise U(-0.1, 0.1) * 512 / L (L = the window's length), row i counted iff mask[i], gradients clipped by
  // value (+-grad_clip) instead of by global norm. The optimiser and schedule stay the flags'.
  std::string recipe = "paper";
};

// Trains an EAGLE head through train_draft_head. Throws Error naming the option or file on a bad configuration or
// a mismatched resume state.
HeadTrainingResult train_eagle_head(const LlamaModel& target, const EagleHeadTrainingOptions& options,
                                    const TextDataset& data);

}  // namespace draftlab
