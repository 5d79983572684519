// The medusa family (Medusa-1): its heads (medusa_heads.h), their trainer (medusa_training.h, through the parallel
// heads' pipeline, strategies/parallel_heads/) and the strategy medusa (medusa_strategy.cpp).
#include "strategies/medusa/medusa_heads.h"
#include "strategies/medusa/medusa_training.h"
#include "strategies/registry.h"

namespace draftlab {

const StrategyDescriptor& medusa_strategy();  // medusa_strategy.cpp

const OfficialParallelRecipe& medusa_official_recipe() {
  // Medusa-1 (medusa/train/train_legacy.py, scripts/train_vicuna_7b.sh): lr 1e-3, no weight decay, warm-up 10% of
  // the steps, cosine to 0.
  static const OfficialParallelRecipe r{ParallelHeadTarget::Tokens, 1e-3, 0.0, 0.0, 10, 0};
  return r;
}

const DraftFamily& medusa_family() {
  static const HeadFamily heads = parallel_head_family(
      {"medusa", "Medusa heads",
       "Medusa-1: K residual-block heads over the target's last feature, head k predicting the token k + 2 ahead",
       "official: Medusa-1's trainer, the head losses summed unweighted, AdamW (0.9, 0.999), lr 1e-3, no decay, "
       "warm-up 10% of the steps, cosine to 0, clip by global norm 1; optimiser flags given explicitly override it",
       "heads (head k predicts the token k + 2 positions after the feature)", "residual blocks per head",
       "shared (the target's LM head: small folders) or own (a [vocab, d] copy per head, as the official heads)", 0},
      medusa_official_recipe(),
      [](const HeadTrainingRun& run, const ParallelHeadShape& s, const ParallelHeadTrainingOptions& o) {
        MedusaTrainingModel model(run.target, o.seed, MedusaConfig{s.heads, s.layers, s.own_lm_head});
        return train_parallel_heads(run.target, model, o, run.data);
      });
  static const DraftFamily f{"medusa", {&medusa_strategy()}, &heads};
  return f;
}

}  // namespace draftlab
