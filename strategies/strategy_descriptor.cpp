#include "strategies/strategy_descriptor.h"

#include "strategies/head_family.h"

namespace draftlab {

const OptionSpec* StrategyDescriptor::option(const std::string& key) const {
  for (const auto& o : options)
    if (o.key == key) return &o;
  return nullptr;
}

const char* needs_name(StrategyNeeds needs) {
  switch (needs) {
    case StrategyNeeds::Nothing: return "nothing";
    case StrategyNeeds::Head: return "EAGLE head";
    case StrategyNeeds::DraftModel: return "draft model";
    case StrategyNeeds::ParallelDraftModel: return "parallel draft model";
  }
  return "?";
}

std::string needs_label(const StrategyDescriptor& strategy) {
  return strategy.needs == StrategyNeeds::Head ? find_head_family(strategy.head_family).title : needs_name(strategy.needs);
}

const char* shape_name(DraftShape shape) {
  switch (shape) {
    case DraftShape::None: return "none";
    case DraftShape::Chain: return "chain";
    case DraftShape::StaticTree: return "static_tree";
    case DraftShape::DynamicTree: return "dynamic_tree";
  }
  return "?";
}

const char* needs_option(StrategyNeeds needs) {
  switch (needs) {
    case StrategyNeeds::Nothing: return "";
    case StrategyNeeds::Head: return "head";
    case StrategyNeeds::DraftModel: return "draft";
    case StrategyNeeds::ParallelDraftModel: return "draft";
  }
  return "";
}

}  // namespace draftlab
