// The hydra family: its heads (hydra_heads.h), their trainer (hydra_training.h, through the parallel heads'
// pipeline, strategies/parallel_heads/) and the strategy hydra (hydra_strategy.cpp).
#include "strategies/hydra/hydra_heads.h"
#include "strategies/hydra/hydra_training.h"
#include "strategies/registry.h"

namespace draftlab {

const StrategyDescriptor& hydra_strategy();  // hydra_strategy.cpp

const OfficialParallelRecipe& hydra_official_recipe() {
  // Hydra++ (hydra/train/train.py with the README's launch): the teacher loss only (the target's distribution of
  // each label), lr 5e-4, weight decay 0.1, warm-up 100 steps, cosine to 0.33 lr.
  static const OfficialParallelRecipe r{ParallelHeadTarget::TargetDistribution, 5e-4, 0.1, 0.33, 0, 100};
  return r;
}

const DraftFamily& hydra_family() {
  static const HeadFamily heads = parallel_head_family(
      {"hydra", "Hydra heads",
       "Hydra: sequentially dependent heads, head k reading the feature and the k + 1 tokens before its prediction",
       "official: Hydra++'s trainer, the head losses summed unweighted, the teacher loss, AdamW (0.9, 0.999), lr "
       "5e-4, decay 0.1, warm-up 100 steps, cosine to 0.33 lr, clip by global norm 1; optimiser flags given "
       "explicitly override it",
       "heads (head k reads the feature and k + 1 tokens, and predicts the token k + 2 positions after the feature)",
       "ResBlocks per head (the first one reads the tokens; Hydra++ uses 4)",
       "shared (the target's LM head) or own (a [vocab, d] copy with bias per head, as the official heads)", 1},
      hydra_official_recipe(),
      [](const HeadTrainingRun& run, const ParallelHeadShape& s, const ParallelHeadTrainingOptions& o) {
        HydraTrainingModel model(run.target, o.seed, HydraConfig{s.heads, s.layers, s.own_lm_head});
        return train_parallel_heads(run.target, model, o, run.data);
      });
  static const DraftFamily f{"hydra", {&hydra_strategy()}, &heads};
  return f;
}

}  // namespace draftlab
