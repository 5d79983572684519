// Training an EAGLE-3 head with "training-time test" (EAGLE-3 paper section 3.2, Figure 6;
// ../shared/papers/eagle3-spec.md section 4): the EAGLE-3 family's TrainableHead for train_draft_head.
//
// Data: windows w_0..w_T and the frozen target's features of every window token (HeadBatch: the residual after
// the head's three layers, G_i [3d], and the final normed hidden state f_i, whose LM head product z_i is the
// target's distribution of w_{i+1}).
//
// K unrolled steps (default 7) over rows j = 0..T-1, each step the same layer and weights:
//   step 0   hidden u_j = fc(G_j), token w_{j+1}, position j
//   step k   hidden u_j = the step k-1 output at the SAME row j (raw, gradients flow through), token w_{j+1+k}
//            (teacher-forced: the ground truth, not the draft's own choice), position j + k
//   attention of row j at step k: the step-0 keys/values of rows i <= j (pairs built from real target features)
//            plus its own keys/values of steps 1..k (the diagonal: its ancestor chain and itself); nothing else.
//            This is the inference tree's visibility (a depth-(k+1) node sees the committed prefix and its
//            ancestors): the unshifted mask of the current official code (spec 4.4).
//   teacher  p = softmax of the target's logits z_{j+1+k} at the draft vocabulary's ids (restricted and
//            renormalised), in float32; the row predicts w_{j+2+k}.
//   weight   row j at step k counts iff w_{j+1+k} lies in the window (j + 1 + k <= T), the loss mask holds at the
//            predicted token (mask[j + 2 + k], mask[T] past the window's end, as the EAGLE-1/2 trainer), and the
//            target's top-1 over the FULL vocabulary is in the draft vocabulary (spec 4.5)
//   loss_k   = -sum_rows weight * sum_v p_v log q_v / (B T): the official mean over all positions, zero-weight
//            ones included
//   loss     = sum_k decay^k loss_k (decay 0.8; not normalised). No feature-regression loss, no input noise.
// Draft vocabulary: the V_d most frequent predicted tokens of the run's training windows (loss-masked ones when
// the data has a mask), ties to the lower id, sorted by id (core/training/draft_vocabulary.h, PredictedTokens).
//
// Validation: the same loss, the step-0 top-1 accuracy (over counted rows, the target's full-vocabulary top-1 as
// truth, a draft top-1 mapped through d2t), and n-alpha for n = 0..kAlphaSteps-1 with the cumulative definition:
// n-alpha = the fraction of rows whose step-n top-1 agrees among those whose steps 0..n-1 all agreed. With hidden
// states fed back and tokens teacher-forced, a row that agreed so far is exactly a chain draft whose earlier tokens
// were all accepted at T = 0 on greedy target-generated data, so n-alpha is chain acceptance there (EAGLE-3
// Figure 7).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "strategies/eagle3/eagle3_head.h"
#include "core/training/head_training.h"

namespace draftlab {

class Eagle3TrainingModel : public TrainableHead {
 public:
  static constexpr int kAlphaSteps = 8;  // 0-alpha .. 7-alpha

  // Starts from Eagle3Head::random(target, seed, 0, draft_ids, input_layers) (undefined draft_ids: the full
  // vocabulary; empty input_layers: eagle3_input_layers). steps: the unrolled TTT steps K (>= 1); decay: the step
  // weight base.
  // eagle31: train an EAGLE-3.1 head (fc_norm before fc, normed states fed back: eagle3_head.h).
  Eagle3TrainingModel(const LlamaModel& target, uint64_t seed, at::Tensor draft_ids = {}, int steps = 7,
                      double decay = 0.8, std::vector<int64_t> input_layers = {}, bool eagle31 = false);

  struct Unrolled {
    std::vector<at::Tensor> outputs;  // per step: the states handed on [B, T, d] (raw; EAGLE-3.1: normed)
    std::vector<at::Tensor> logits;   // per step: draft logits [B, T, V_d]
  };
  // The unrolled forward of `steps` steps over windows [B, T + 1] and layer features G [B, T + 1, 3d] (rows
  // 0..T-1 read G_0..G_{T-1}; tokens past the window are read as token 0, in rows that never count).
  Unrolled unroll(const at::Tensor& windows, const at::Tensor& layer_features, int steps) const;

  struct Loss {
    at::Tensor loss;                 // scalar, with its graph
    std::vector<double> step_loss;   // loss_k
    int64_t correct = 0, count = 0;  // step-0 top-1 agreement over counted rows
    int64_t agreed[kAlphaSteps] = {}, tried[kAlphaSteps] = {};  // n-alpha counts (with_alpha)
  };
  // The TTT loss of a batch (HeadBatch::features [B, T + 1, 4d]); with_alpha unrolls kAlphaSteps steps for the
  // n-alpha counts (the loss still sums the first `steps`).
  Loss ttt_loss(const HeadBatch& batch, bool with_alpha = false) const;

  // TrainableHead.
  std::string family_name() const override { return "eagle3"; }
  std::vector<std::pair<std::string, at::Tensor>> parameters() const override;
  std::map<std::string, std::string> identity() const override;
  std::vector<int64_t> feature_layers() const override;
  at::Tensor loss(const HeadBatch& batch, int64_t step) const override;
  HeadEvaluation evaluate(const HeadBatch& batch) const override;
  void save(const std::string& dir, at::ScalarType file_dtype) const override;

  // Detached copies as an inference head (the target's compute options).
  std::unique_ptr<Eagle3Head> to_head() const;
  const Eagle3HeadWeights& weights() const { return w_; }
  const at::Tensor& draft_ids() const { return draft_ids_; }
  int steps() const { return steps_; }

 private:
  // One step: hidden [B, T, d] and tokens [B, T] at positions base + offset, attending to the step-0 keys
  // (causal) and the diagonal keys/values so far (appended to). Returns the raw outputs [B, T, d].
  at::Tensor step(const at::Tensor& hidden, const at::Tensor& tokens, int64_t offset, std::vector<at::Tensor>& keys,
                  std::vector<at::Tensor>& values) const;

  const LlamaModel& target_;
  ModelConfig config_;
  RotaryEmbedding rope_;
  Eagle3HeadWeights w_;  // row-major leaves
  at::Tensor draft_ids_;  // [V_d] int64 CPU; undefined = the full vocabulary
  std::vector<int64_t> input_layers_;
  int steps_;
  double decay_;
};

// The EAGLE-3 family's options, besides the ones every family shares.
struct Eagle3TrainingOptions : HeadTrainingOptions {
  int64_t draft_vocab = 0;  // V_d most frequent predicted tokens; 0 = the full vocabulary
  int steps = 7;            // TTT steps K
  double decay = 0.8;       // step k weighs decay^k
  // The three target layers whose inputs the head reads (empty: eagle3_input_layers). EAGLE-3 Table 2's "TTT with
  // the top-layer feature only" is {L, L, L}: fc over three copies of the last layer's output is a d -> d map
  // (the sum of its three blocks), the fusion removed and everything else kept.
  std::vector<int64_t> feature_layers;
  bool eagle31 = false;     // train an EAGLE-3.1 head (--variant eagle3.1)
  // A SpecForge vocabulary-mapping file (torch.save of {"d2t", "t2d"}): the draft vocabulary it holds instead of
  // one counted from the data.
  std::string vocab_mapping;
};

HeadTrainingResult train_eagle3_head(const LlamaModel& target, const Eagle3TrainingOptions& options,
                                     const TextDataset& data);

}  // namespace draftlab
