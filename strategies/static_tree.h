// static-tree: EAGLE-1's fixed draft tree (EAGLE paper appendix A.1, Figure 9), filled by the EAGLE head.
//
// The shape comes from a JSON file (data/trees/*.json) listing root-to-node paths of sibling ranks:
//   {"name": ..., "paths": [[0], [1], [0, 0], [0, 1], [0, 0, 0], ...]}
// where [0, 1] is "the 2nd most probable child of the most probable child of the root". The tree is filled depth
// by depth: one head forward (EagleDrafter::expand) per depth over the nodes that have children, and the child of
// rank r is the head's r-th most probable token. Drafts are deterministic top-k choices at any temperature
// (distribution -1: the verifier treats them as point masses), as EAGLE's tree drafts are.
//
// Options (static_tree_strategy() in static_tree.cpp): tree=NAME or PATH (default mc_sim_7b_63, EAGLE-1's tree).
// A relative tree path is tried from the working directory, then from the source tree (DRAFTLAB_SOURCE_DIR, set
// by strategies/CMakeLists.txt); a bare name such as tree=chain5 means data/trees/chain5.json there.
#pragma once

#include <string>
#include <vector>

#include "strategies/registry.h"

namespace draftlab {

// A validated tree shape (usable by any strategy with a fixed shape).
struct TreeSpec {
  std::string name;    // "name" from the file (empty if absent)
  std::string source;  // the file, for messages
  // Paths sorted by depth, then lexicographically: parents come before children and siblings are in rank order,
  // so the flat order is a valid DraftTree insertion order.
  std::vector<std::vector<int32_t>> paths;
  std::vector<int32_t> parent;  // index in `paths` of each path's parent, -1 under the root

  int32_t size() const { return static_cast<int32_t>(paths.size()); }
  int32_t max_depth() const;
};

// Parses and validates the JSON text of a tree file. Throws Error naming `source` and the offending entry
// (paths[i]): not a list, empty, a rank that is not an integer >= 0, a duplicate, or a missing prefix (every
// path's parent path must be listed too).
TreeSpec parse_tree_spec(const std::string& json_text, const std::string& source);

// Reads a tree file (see resolve_tree_path).
TreeSpec load_tree_spec(const std::string& path);

// tree=VALUE to a file: as given if it exists; else, for a relative path, under the source directory; a bare
// name (no '/', no ".json") is data/trees/NAME.json. Throws Error listing what was tried.
std::string resolve_tree_path(const std::string& value);

}  // namespace draftlab
