// The EAGLE-1/2 heads (eagle_family.cpp): the family the eagle strategies (static-tree, eagle-chain, eagle2) draft
// with through the EAGLE tree grower (strategies/eagle_tree/).
#pragma once

#include "strategies/head_family.h"

namespace draftlab {

const HeadFamily& eagle_heads();

}  // namespace draftlab
