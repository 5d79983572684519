// vanilla: no draft. Every cycle verifies just the root, i.e. plain autoregressive decoding through the
// speculative loop: the baseline every speedup is measured against, and a check of the loop itself.
//
// Its strategy class is core's NoDraftStrategy (draft_strategy.h). To add a family, copy this file to
// strategies/<name>/, write a strategy class (a SequenceStrategy, or a DraftStrategy with batch forms), fill in
// the descriptor, rename vanilla_family() to <name>_family() and add X(<name>) to DRAFTLAB_FAMILIES in
// strategies/registry.h.
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

const DraftFamily& vanilla_family() {
  static const DraftFamily f{"vanilla", {&vanilla_strategy()}};
  return f;
}

}  // namespace draftlab
