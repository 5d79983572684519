// eagle3: EAGLE-3 (paper section 3, ../shared/papers/eagle3-spec.md section 3): EAGLE-2's dynamic tree, expanded
// and reranked exactly as strategies/eagle_tree/eagle2.h describes, drafted by an EAGLE-3 head (strategies/eagle3/eagle3_head.h).
// The official drafting loop differs from EAGLE-2's in three places only (spec 3.3), all inside the head: each
// level's logits come from the head's own norm and draft-vocabulary LM head, draft indices map to target ids
// through d2t, and the root level reads fc(low, middle, high target features), which the decoder captures in the
// same target forward (DraftStrategy::target_feature_layers). top_k=1 drafts a chain.
#include "strategies/eagle3/eagle3_strategy.h"

#include "strategies/eagle_tree/eagle2.h"

namespace draftlab {

const StrategyDescriptor& eagle3_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d = eagle2_descriptor_for("eagle3", eagle3_heads());
    d.summary = "EAGLE-3: EAGLE-2's dynamic tree drafted by an EAGLE-3 head (fused low/middle/high target features, "
                "own draft vocabulary)";
    d.test_variants = {{"eagle3", {}},
                       // A random head's one drafted token has a small target probability at T 1.5: the wrong
                       // rule's bias p(x) (1 - p(x)) shows only on a flatter p (T 8).
                       with_control_temperature({"eagle3_chain", {"top_k=1", "depth=5"}}, 8.0),
                       {"eagle3_draft_vocab", {"total_tokens=16", "depth=4", "top_k=4", "draft_vocab=6"}},
                       // EAGLE-3.1: fc_norm, normed states fed back.
                       with_control_temperature({"eagle31_chain", {"top_k=1", "depth=5", "head_variant=eagle3.1"}}, 8.0)};
    return d;
  }();
  return d;
}

}  // namespace draftlab
