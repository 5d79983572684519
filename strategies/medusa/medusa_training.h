// Training Medusa-1 heads (medusa_heads.h) for a frozen target: the Medusa kind of parallel heads
// (parallel_head_training.h), which runs the loop, the loss (per-head cross-entropy, decaying weights) and the
// checkpoints. `draftlab train-head --kind medusa` builds one of these and calls train_parallel_heads().
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strategies/medusa/medusa_heads.h"
#include "strategies/parallel_heads/parallel_head_training.h"

namespace draftlab {

class MedusaTrainingModel : public TrainableParallelHeads {
 public:
  // Starts from the official initialisation, MedusaHeads::random(target, seed, config, 0): zero block weights,
  // nn.Linear's bias init, own LM heads copied from the target's. Leaves are float32 (or the target's compute dtype
  // and device).
  MedusaTrainingModel(const LlamaModel& target, uint64_t seed, MedusaConfig config = {});

  std::string family_name() const override { return "medusa"; }
  int64_t num_heads() const override { return config_.num_heads; }
  // "head.{k}.{j}.weight", "head.{k}.{j}.bias", and "head.{k}.lm_head" with own LM heads.
  std::vector<std::pair<std::string, at::Tensor>> parameters() const override;
  // Head k on f_0 .. f_{T-k-2} (the window's last k + 1 features have no label inside it).
  std::vector<at::Tensor> logits(const at::Tensor& windows, const at::Tensor& features) const override;
  std::string config_json() const override;
  void save(const std::string& dir, at::ScalarType file_dtype) const override;

  // Detached copies as inference heads.
  std::unique_ptr<MedusaHeads> to_heads() const;
  const MedusaHeadWeights& weights() const { return w_; }

 private:
  const LlamaModel& target_;
  MedusaConfig config_;
  MedusaHeadWeights w_;  // leaves
};

// --recipe official: Medusa-1's trainer settings (parallel_head_training.h).
const OfficialParallelRecipe& medusa_official_recipe();

}  // namespace draftlab
