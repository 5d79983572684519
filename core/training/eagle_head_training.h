// Training an EAGLE draft head for a frozen target (EAGLE paper section 3.2; SafeAILab/EAGLE train/main.py).
//
// Data: windows w_0..w_T of T + 1 corpus tokens. The frozen target (no gradient) gives the features f_0..f_T
// (its final normed hidden states, LlamaModel::forward's `features`) and its next-token distributions
// p_i = softmax(lm_head(f_i)). The head sees at position i (0..T-1, RoPE position i, causal) the pair
// (w_{i+1}, f_i + U(-0.1, 0.1) noise) and predicts f^_{i+1}:
//   loss = SmoothL1(f^_{i+1}, f_{i+1}) + 0.1 * CE(p_{i+1}, log_softmax(lm_head(f^_{i+1})))   (soft cross-entropy)
// Validation (no noise): the same loss and the top-1 accuracy argmax lm_head(f^) == argmax lm_head(f).
//
// `draftlab train-head` is a thin command line over train_eagle_head(). DIR after a run:
//   config.json, model.safetensors    the head, as EagleHead::save writes it (EagleHead::load reads it)
//   training_state.safetensors        parameters, AdamW moments, step, curves: --resume continues exactly
//   training_log.h5                   the loss curves
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model/eagle_head.h"
#include "core/model/llama_model.h"
#include "core/training/text_dataset.h"
#include "core/training/trainer.h"

namespace draftlab {

// The head's trainable tensors (row-major [out, in] leaves) and the batched, differentiable head forward.
class HeadTrainingModel {
 public:
  // Starts from EagleHead::random(target, seed).
  HeadTrainingModel(const LlamaModel& target, uint64_t seed);

  // Named leaves for the Trainer ("fc", "fc_bias", "layers.0.wqkv", ...).
  std::vector<std::pair<std::string, at::Tensor>> parameters() const;

  // tokens [B, T] int64, features [B, T, d] -> predicted next features [B, T, d]; positions 0..T-1, causal.
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& features) const;

  struct Loss {
    at::Tensor loss;            // scalar, with its graph
    double smooth_l1 = 0, soft_ce = 0;
    int64_t correct = 0, count = 0;  // top-1 agreement with the target
  };
  // windows [B, T + 1] int64. noise_seed < 0: no input noise (validation).
  Loss loss(const at::Tensor& windows, int64_t noise_seed, double cls_weight = 0.1) const;

  // Detached copies as an inference head (column-major, the target's compute options).
  std::unique_ptr<EagleHead> to_head() const;

  const ModelConfig& config() const { return config_; }

 private:
  const LlamaModel& target_;
  ModelConfig config_;
  RotaryEmbedding target_rope_, rope_;
  EagleHeadWeights w_;  // row-major leaves
};

struct HeadTrainingOptions {
  TrainerOptions trainer;
  int64_t batch = 16;
  int64_t context = 128;      // head positions per window (target windows are context + 1 tokens)
  uint64_t seed = 0;          // initial weights, every batch and its noise
  int64_t eval_windows = 64;
  double cls_weight = 0.1;
  std::string out_dir;
  bool resume = false;
  std::string command_line;
  at::ScalarType save_dtype = at::kFloat;
};

struct HeadTrainingResult {
  int64_t parameters = 0;
  double tokens_per_second = 0;
  TrainingCurves curves;
  std::vector<double> eval_accuracy;  // one per validation pass, in order
};

// Throws Error naming the option or file on a bad configuration or a mismatched resume state.
HeadTrainingResult train_eagle_head(const LlamaModel& target, const HeadTrainingOptions& options,
                                    const TextDataset& data);

}  // namespace draftlab
