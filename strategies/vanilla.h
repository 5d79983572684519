#pragma once

#include "strategies/registry.h"

namespace draftlab {

std::unique_ptr<DraftStrategy> make_vanilla_strategy(const StrategyContext& context, const StrategyOptions& options);

}  // namespace draftlab
