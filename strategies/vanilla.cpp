// vanilla: no draft. Every cycle verifies just the root, i.e. plain autoregressive decoding through the
// speculative loop: the baseline every speedup is measured against, and a check of the loop itself.
//
// Its strategy class is core's NoDraftStrategy (draft_strategy.h). To add a strategy, copy this file, write a
// DraftStrategy class, rename vanilla_strategy() to <file>_strategy(), fill in the descriptor, and add X(<file>) to
// DRAFTLAB_STRATEGIES in strategies/registry.h.
#include "strategies/registry.h"

namespace draftlab {

const StrategyDescriptor& vanilla_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "vanilla";
    d.summary = "no draft: plain decoding through the speculative loop (the baseline)";
    d.needs = StrategyNeeds::Nothing;
    d.shape = DraftShape::None;
    d.has_confidence = false;
    d.options = {};  // e.g. integer_option("gamma", 4, 1, 64, "tokens drafted per cycle"); read: o.get_int("gamma")
    d.test_variants = {{"vanilla", {}}};
    d.make = [](const StrategyContext&, const StrategyOptions&) { return std::make_unique<NoDraftStrategy>(); };
    return d;
  }();
  return d;
}

}  // namespace draftlab
