// TreeSpec - a fixed draft-tree shape read from a JSON file of root-to-node paths of sibling ranks
// ({"name": ..., "paths": [[0], [1], [0, 0], ...]}, data/trees/*.json). Used by static-tree and the parallel-head
// strategies. Torch-free, so the parser can be fuzzed alone (tests/fuzz).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// "[0, 1]": a path as messages print it.
std::string path_string(const std::vector<int32_t>& path);

}  // namespace draftlab
