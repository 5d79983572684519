// static-tree: EAGLE-1's fixed draft tree (EAGLE paper appendix A.1, Figure 9), filled by the EAGLE head.
//
// The shape comes from a JSON file (data/trees/*.json) listing root-to-node paths of sibling ranks:
//   {"name": ..., "paths": [[0], [1], [0, 0], [0, 1], [0, 0, 0], ...]}
// where [0, 1] is "the 2nd most probable child of the most probable child of the root". The tree is filled depth
// by depth: one head forward (EagleDrafter::expand) per depth over the nodes that have children. At T = 0 the
// child of rank r is the head's r-th most probable token. At T > 0 (sample_tree=true, the default, as EAGLE-1)
// a node's children are drawn without replacement from the head's processed distribution q, in sibling order, and
// the verifier divides each by its conditional q (DraftTree::draft_distribution); with sample_tree=false they are
// the top-k tokens, point masses to the verifier (EAGLE-2's way). A node whose q has fewer tokens with mass than it
// has children in the shape (top-k / top-p sampling) gets only that many; the rest of its subtree is left out.
//
// Options (static_tree_strategy() in static_tree.cpp): tree=NAME or PATH (default mc_sim_7b_63, EAGLE-1's tree).
// A relative tree path is tried from the working directory, then from the source tree (DRAFTLAB_SOURCE_DIR, set
// by strategies/CMakeLists.txt); a bare name such as tree=chain5 means data/trees/chain5.json there.
#pragma once

// The tree file format and its parser live in tree_spec.h (torch-free: fuzzed on its own).
#include "strategies/registry.h"
#include "strategies/tree_spec.h"

namespace draftlab {

// static-tree: EAGLE-1 (the eagle family).
const StrategyDescriptor& static_tree_strategy();

}  // namespace draftlab
