// eagle3: EAGLE-2's dynamic tree drafted by an EAGLE-3 head (eagle3_strategy.cpp).
#pragma once

#include "strategies/head_family.h"
#include "strategies/strategy_descriptor.h"

namespace draftlab {

const StrategyDescriptor& eagle3_strategy();

// The EAGLE-3 heads (eagle3_family.cpp).
const HeadFamily& eagle3_heads();

}  // namespace draftlab
