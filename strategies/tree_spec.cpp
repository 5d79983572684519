#include "strategies/tree_spec.h"

#include <algorithm>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"

#ifndef DRAFTLAB_SOURCE_DIR
#error "DRAFTLAB_SOURCE_DIR must be defined (strategies/CMakeLists.txt does it)"
#endif

namespace draftlab {

std::string path_string(const std::vector<int32_t>& p) {
  std::string s = "[";
  for (size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + std::to_string(p[i]);
  return s + "]";
}

int32_t TreeSpec::max_depth() const { return paths.empty() ? 0 : static_cast<int32_t>(paths.back().size()); }

TreeSpec parse_tree_spec(const std::string& text, const std::string& source) {
  using nlohmann::json;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error::in_file(source, "tree", "valid JSON", e.what());
  }
  if (!j.is_object()) throw Error::in_file(source, "tree", "a JSON object with \"paths\"", j.type_name());
  if (!j.contains("paths") || !j.at("paths").is_array())
    throw Error::in_file(source, "paths", "a list of paths (lists of sibling ranks)",
                         j.contains("paths") ? std::string(j.at("paths").type_name()) : "no such key");
  const json& paths = j.at("paths");
  if (paths.empty()) throw Error::in_file(source, "paths", "at least one path", "an empty list");

  // Read every path, remembering where it was in the file for messages.
  std::vector<std::pair<std::vector<int32_t>, size_t>> read;
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string field = "paths[" + std::to_string(i) + "]";
    const json& p = paths[i];
    if (!p.is_array() || p.empty())
      throw Error::in_file(source, field, "a non-empty list of sibling ranks (the root is implicit)", p.dump());
    std::vector<int32_t> ranks;
    for (const json& r : p) {
      if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() > 1000000)
        throw Error::in_file(source, field, "sibling ranks that are integers >= 0", p.dump());
      ranks.push_back(static_cast<int32_t>(r.get<int64_t>()));
    }
    read.emplace_back(std::move(ranks), i);
  }
  std::stable_sort(read.begin(), read.end(), [](const auto& a, const auto& b) {
    if (a.first.size() != b.first.size()) return a.first.size() < b.first.size();
    return a.first < b.first;
  });

  TreeSpec spec;
  spec.source = source;
  if (j.contains("name") && j.at("name").is_string()) spec.name = j.at("name").get<std::string>();
  std::map<std::vector<int32_t>, int32_t> index;
  for (const auto& [path, original] : read) {
    const std::string field = "paths[" + std::to_string(original) + "]";
    if (index.count(path)) throw Error::in_file(source, field, "each path listed once", path_string(path) + " twice");
    int32_t parent = -1;
    if (path.size() > 1) {
      const std::vector<int32_t> prefix(path.begin(), path.end() - 1);
      auto it = index.find(prefix);
      if (it == index.end())
        throw Error::in_file(source, field, "its prefix " + path_string(prefix) + " to be listed too (a node needs its parent)",
                             path_string(path) + " without " + path_string(prefix));
      parent = it->second;
    }
    index[path] = spec.size();
    spec.paths.push_back(path);
    spec.parent.push_back(parent);
  }
  return spec;
}

TreeSpec load_tree_spec(const std::string& path) { return parse_tree_spec(read_text_file(path), path); }

std::string resolve_tree_path(const std::string& value) {
  check(!value.empty(), "option tree: expected a tree file or name, got ''");
  std::vector<std::string> tried{value};
  if (is_file(value)) return value;
  if (value[0] != '/') {
    const std::string source_dir = DRAFTLAB_SOURCE_DIR;
    const bool bare = value.find('/') == std::string::npos &&
                      (value.size() < 5 || value.compare(value.size() - 5, 5, ".json") != 0);
    std::vector<std::string> candidates{source_dir + "/" + value};
    if (bare) candidates.push_back(source_dir + "/data/trees/" + value + ".json");
    for (const auto& c : candidates) {
      tried.push_back(c);
      if (is_file(c)) return c;
    }
  }
  std::string list;
  for (const auto& t : tried) list += (list.empty() ? "" : ", ") + t;
  throw Error("option tree: no tree file '" + value + "' (tried " + list + ")");
}

}  // namespace draftlab
