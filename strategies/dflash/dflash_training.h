// DFlash's training (SpecForge's DFlash trainer, aligned with the paper; z-lab/dflash ships none): random anchors a
// in each window, a block at each (slot 0 = token a, slots 1..B-1 = the mask id, positions a .. a + B - 1) seeing
// the context features of positions < a (strictly: at inference the last committed token's features are not known
// yet) and its own block in both directions; slot k's label is the token a + k, weighed exp(-(k - 1) / gamma). One
// forward runs every block of a window over the window's context keys (dflash_head.h's functions, as inference).
#pragma once

#include <cstdint>
#include <memory>

#include "core/training/head_training.h"
#include "strategies/dflash/dflash_head.h"

namespace draftlab {

struct DFlashTrainingOptions : HeadTrainingOptions {
  int64_t layers = 1;       // draft decoder layers
  int64_t block_size = 8;   // B: B - 1 drafted tokens per forward
  int64_t anchors = 16;     // blocks per window
  double gamma = 4.0;       // slot k weighs exp(-(k - 1) / gamma)
  int64_t mask_token = -1;  // -1: the highest id absent from the training data
};

// The blocks of windows: anchors (sorted) and, for each block slot, its token and position; the additive mask
// [A B, (T + 1) + A B] over the window's context then the blocks.
struct DFlashBlocks {
  std::vector<int64_t> anchors;
  at::Tensor tokens;     // [rows, A B] int64
  at::Tensor positions;  // [A B] int64
  at::Tensor mask;       // [A B, T + 1 + A B]
};
DFlashBlocks dflash_blocks_of(const at::Tensor& windows, const std::vector<int64_t>& anchors, int64_t block_size,
                              int64_t mask_token);

class DFlashTrainingModel : public TrainableHead {
 public:
  DFlashTrainingModel(const LlamaModel& target, uint64_t seed, const DFlashTrainingOptions& options);

  std::string family_name() const override { return "dflash"; }
  std::vector<std::pair<std::string, at::Tensor>> parameters() const override;
  std::map<std::string, std::string> identity() const override;
  std::vector<int64_t> feature_layers() const override { return config_.target_layer_ids; }
  int64_t min_context() const override { return config_.block_size + 1; }
  at::Tensor loss(const HeadBatch& batch, int64_t step) const override;
  HeadEvaluation evaluate(const HeadBatch& batch) const override;
  void save(const std::string& dir, at::ScalarType file_dtype) const override;

  // The logits [rows, A, B - 1, vocab] of the blocks at `anchors` (the training forward).
  at::Tensor block_logits(const HeadBatch& batch, const std::vector<int64_t>& anchors) const;
  std::unique_ptr<DFlashHead> to_head() const;

 private:
  struct Loss {
    at::Tensor loss;
    std::vector<int64_t> agreed, tried;  // n-alpha: slots 1..n all agreeing with the label
  };
  Loss block_loss(const HeadBatch& batch, const std::vector<int64_t>& anchors, bool counts) const;
  std::vector<int64_t> anchors_for(int64_t T, uint64_t seed) const;

  const LlamaModel& target_;
  DFlashConfig config_;
  DFlashWeights w_;
  RotaryEmbedding rope_;
  int64_t anchors_;
  double gamma_;
  uint64_t seed_;
};

HeadTrainingResult train_dflash_head(const LlamaModel& target, const DFlashTrainingOptions& options,
                                     const TextDataset& data);

}  // namespace draftlab
