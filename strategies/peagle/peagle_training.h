// Training a P-EAGLE draft (SpecForge's OnlinePEagleModel, specforge/algorithms/peagle/model.py): one forward of
// peagle_rows (peagle_head.h) over the rollouts of a window, flattened.
//
// Data: windows w_0..w_T with the frozen target's features (HeadBatch: the three layers' inputs G_i [3d], then the
// final normed hidden state f_i, whose LM head product z_i is the target's distribution of w_{i+1}).
//
// Rows (COD sampling, generate_cod_sample_indices): depth 0 = every pair a = 0..T-1 (token w_{a+1}, feature G_a,
// position a); depth d >= 1 keeps floor((T - d) max(r^d, r_min)) of the anchors kept at depth d - 1 whose slot
// a + d stays in the window (a + d <= T - 1), drawn at random from (seed, step) for the whole step (every window of
// a step shares the draw; SpecForge trains one window per step); a row (a, d >= 1) is the mask id with mask_hidden
// at position a + d. Attention: (a, d) sees (a', 0) for a' <= a and (a, d') for d' <= d (SpecForge's mask_mod).
// Row (a, d) predicts w_{a+d+2}; its teacher is softmax(z_{a+d+1}) restricted to the draft vocabulary and
// renormalised (float32); it counts where the loss mask holds at the predicted token (mask[T] past the window, as
// the EAGLE-3 trainer) and the target's full-vocabulary top-1 lies in the draft vocabulary.
// loss = -sum_rows weight sum_v p_v log q_v / (windows in the step x rows): the mean over every sampled row, the
// convention of draftlab's EAGLE-3 trainer (SpecForge divides by the counted rows instead: a scale of the learning
// rate). No TTT unroll, no decay.
//
// Validation keeps every rollout (r = 1) so that n-alpha is exact: the fraction of anchors whose depth-n top-1 agrees
// with the target's among those whose depths 0..n-1 agreed; a chain of one forward accepts exactly that at T = 0 on
// target-generated data.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/training/head_training.h"
#include "strategies/peagle/peagle_head.h"

namespace draftlab {

struct PEagleTrainingOptions : HeadTrainingOptions {
  int64_t layers = 2;        // N decoder layers (AWS's GPT-OSS heads: 2; SpecForge's default 4)
  int64_t depths = 5;        // K: rollout depth (SpecForge's qwen3-8b recipe: 5)
  double cod_ratio = 0.8;    // r
  double cod_min = 0.2;      // r_min
  int64_t draft_vocab = 0;   // V_d most frequent predicted tokens; 0 = the full vocabulary
  int64_t mask_token = -1;   // -1: the highest id absent from the training data
  bool train_embedding = false;  // a trained embedding of its own (SpecForge's), saved as embed_tokens
};

// The COD rows of a window of T pairs: anchors and depths, depth-major (all of depth 0, then 1, ...), anchors
// ascending within a depth. ratio 1: every rollout (validation).
struct PEagleRows {
  std::vector<int64_t> anchor, depth;
  int64_t size() const { return static_cast<int64_t>(anchor.size()); }
};
PEagleRows peagle_cod_rows(int64_t T, int64_t depths, double ratio, double ratio_min, uint64_t seed);

// The additive attention mask [Q, Q] of those rows (0 visible, -inf hidden).
at::Tensor peagle_row_mask(const PEagleRows& rows);

class PEagleTrainingModel : public TrainableHead {
 public:
  PEagleTrainingModel(const LlamaModel& target, uint64_t seed, at::Tensor draft_ids,
                      const PEagleTrainingOptions& options);

  std::string family_name() const override { return "peagle"; }
  std::vector<std::pair<std::string, at::Tensor>> parameters() const override;
  std::map<std::string, std::string> identity() const override;
  std::vector<int64_t> feature_layers() const override;
  int64_t min_context() const override { return config_.depths + 1; }
  at::Tensor loss(const HeadBatch& batch, int64_t step) const override;
  HeadEvaluation evaluate(const HeadBatch& batch) const override;
  void save(const std::string& dir, at::ScalarType file_dtype) const override;

  // The draft-vocabulary logits [B, Q, V_d] of `rows` over a batch (the training forward).
  at::Tensor row_logits(const HeadBatch& batch, const PEagleRows& rows) const;
  std::unique_ptr<PEagleHead> to_head() const;

 private:
  struct Loss {
    at::Tensor loss;
    std::vector<int64_t> agreed, tried;  // n-alpha over complete rollouts (validation)
  };
  Loss rows_loss(const HeadBatch& batch, const PEagleRows& rows, bool counts) const;

  const LlamaModel& target_;
  PEagleConfig config_;
  PEagleWeights w_;
  at::Tensor draft_ids_;
  RotaryEmbedding rope_;
  double cod_ratio_, cod_min_;
  uint64_t seed_;
};

HeadTrainingResult train_peagle_head(const LlamaModel& target, const PEagleTrainingOptions& options,
                                     const TextDataset& data);

}  // namespace draftlab
