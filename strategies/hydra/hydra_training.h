// Training Hydra heads (hydra_heads.h) for a frozen target: the Hydra kind of parallel heads
// (parallel_head_training.h runs the loop, the loss and the checkpoints). Head k at position i reads f_i and the
// window's tokens w_{i+1} .. w_{i+k+1} (teacher forcing: the true tokens stand for the drafted ones) and predicts
// w_{i+k+2}. Hydra++'s teacher loss is ParallelHeadTarget::TargetDistribution (`train-head --kind hydra --teacher`).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strategies/hydra/hydra_heads.h"
#include "strategies/parallel_heads/parallel_head_training.h"

namespace draftlab {

class HydraTrainingModel : public TrainableParallelHeads {
 public:
  // Starts from HydraHeads::random(target, seed, config, 0): zero block weights, the residual projection passing
  // the feature through, own LM heads copied from the target's. Leaves on the target's compute device and dtype.
  HydraTrainingModel(const LlamaModel& target, uint64_t seed, HydraConfig config = {});

  std::string family_name() const override { return "hydra"; }
  int64_t num_heads() const override { return config_.num_heads; }
  // "head.{k}.input.weight", ... (the HydraHeadWeights fields).
  std::vector<std::pair<std::string, at::Tensor>> parameters() const override;
  std::vector<at::Tensor> logits(const at::Tensor& windows, const at::Tensor& features) const override;
  std::string config_json() const override;
  void save(const std::string& dir, at::ScalarType file_dtype) const override;

  // Detached copies as inference heads.
  std::unique_ptr<HydraHeads> to_heads() const;

 private:
  const LlamaModel& target_;
  HydraConfig config_;
  HydraHeadWeights w_;  // leaves
};

// --recipe official: Hydra++'s trainer settings (parallel_head_training.h).
const OfficialParallelRecipe& hydra_official_recipe();

}  // namespace draftlab
