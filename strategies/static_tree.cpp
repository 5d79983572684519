#include "strategies/static_tree.h"

#include <algorithm>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "strategies/eagle_drafter.h"

#ifndef DRAFTLAB_SOURCE_DIR
#error "DRAFTLAB_SOURCE_DIR must be defined (strategies/CMakeLists.txt does it)"
#endif

namespace draftlab {

namespace {

std::string path_string(const std::vector<int32_t>& p) {
  std::string s = "[";
  for (size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + std::to_string(p[i]);
  return s + "]";
}

class StaticTreeStrategy : public DraftStrategy {
 public:
  StaticTreeStrategy(std::shared_ptr<const FeatureHead> head, TreeSpec spec)
      : drafter_(std::move(head)), spec_(std::move(spec)) {}

  std::string name() const override { return "static-tree"; }
  std::vector<int64_t> target_feature_layers() const override { return drafter_.head().target_feature_layers(); }

  void begin(const std::vector<int64_t>& prompt, const at::Tensor& features, int64_t first) override {
    drafter_.begin(prompt, features, first);
  }
  void observe(const VerifyResult& result) override { drafter_.observe(result); }

  DraftTree propose(const DraftRequest& request) override { return propose_batch({this}, {request})[0]; }

  // The tree is drafted depth by depth; in a batch every sequence's depth d in one head forward
  // (EagleDrafter::expand_batch).
  std::vector<DraftTree> propose_batch(const std::vector<DraftStrategy*>& peers,
                                       const std::vector<DraftRequest>& requests) override {
    const auto trees_of = peers_of_type<StaticTreeStrategy>(peers);
    if (trees_of.empty()) return DraftStrategy::propose_batch(peers, requests);
    const size_t B = trees_of.size();
    std::vector<DraftTree> trees(B);  // node i of a tree is path i of its spec (same insertion order)
    std::vector<int32_t> count(B), next(B, 0);
    for (size_t b = 0; b < B; ++b) {
      StaticTreeStrategy& s = *trees_of[b];
      s.drafter_.start_tree(requests[b]);
      // Paths are sorted by depth, so a prefix of them is the tree cut at any depth or size, still connected.
      while (count[b] < s.spec_.size() && static_cast<int32_t>(s.spec_.paths[count[b]].size()) <= requests[b].tokens_wanted)
        ++count[b];
      count[b] = std::min(count[b], requests[b].max_nodes);
    }
    while (true) {
      // Each unfinished tree's next depth: the parents of its nodes, in order (siblings are contiguous), each
      // expanded once.
      struct Level {
        size_t b;
        int32_t lo, hi;
        std::vector<int32_t> slot;
        int64_t k = 1;
      };
      std::vector<Level> levels;
      std::vector<EagleDrafter*> drafters;
      std::vector<const DraftTree*> grown;
      std::vector<std::vector<int32_t>> frontiers;
      for (size_t b = 0; b < B; ++b) {
        if (next[b] >= count[b]) continue;
        const TreeSpec& spec = trees_of[b]->spec_;
        Level level{b, next[b], next[b], {}};
        const size_t depth = spec.paths[level.lo].size();
        while (level.hi < count[b] && spec.paths[level.hi].size() == depth) ++level.hi;
        std::vector<int32_t> frontier;
        for (int32_t i = level.lo; i < level.hi; ++i) {
          const int32_t parent = spec.parent[i];  // -1 == EagleDrafter::kRoot
          if (frontier.empty() || frontier.back() != parent) frontier.push_back(parent);
          level.slot.push_back(static_cast<int32_t>(frontier.size()) - 1);
          level.k = std::max<int64_t>(level.k, spec.paths[i].back() + 1);
        }
        levels.push_back(std::move(level));
        drafters.push_back(&trees_of[b]->drafter_);
        grown.push_back(&trees[b]);
        frontiers.push_back(std::move(frontier));
      }
      if (levels.empty()) break;
      const auto logits = EagleDrafter::expand_batch(drafters, grown, frontiers);
      for (size_t l = 0; l < levels.size(); ++l) {
        const Level& level = levels[l];
        const TreeSpec& spec = trees_of[level.b]->spec_;
        const auto candidates = top_candidates(logits[l], level.k);
        for (int32_t i = level.lo; i < level.hi; ++i) {
          const Candidates& c = candidates[level.slot[i - level.lo]];
          const auto rank = static_cast<size_t>(spec.paths[i].back());
          trees[level.b].add(c.tokens[rank], spec.parent[i], c.probs[rank]);
        }
        next[level.b] = level.hi;
      }
    }
    return trees;
  }

  void observe_batch(const std::vector<DraftStrategy*>& peers, const std::vector<const VerifyResult*>& results) override {
    const auto trees_of = peers_of_type<StaticTreeStrategy>(peers);
    if (trees_of.empty()) return DraftStrategy::observe_batch(peers, results);
    std::vector<EagleDrafter*> drafters;
    for (auto* s : trees_of) drafters.push_back(&s->drafter_);
    EagleDrafter::observe_batch(drafters, results);
  }

 private:
  EagleDrafter drafter_;
  TreeSpec spec_;
};

}  // namespace

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

const StrategyDescriptor& static_tree_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "static-tree";
    d.summary = "EAGLE-1: the same tree of sibling ranks every cycle, filled by an EAGLE head";
    d.needs = StrategyNeeds::Head;
    d.shape = DraftShape::StaticTree;
    d.has_confidence = true;
    d.options = {text_option("tree", "mc_sim_7b_63", "a tree file (JSON paths of sibling ranks) or a name under data/trees")};
    for (auto& o : eagle_head_options()) d.options.push_back(o);
    // The default tree; and a 4-token draft vocabulary whose ranks run past it (probability-0 candidates).
    d.test_variants = {{"static_tree", {}},
                       {"static_tree_draft_vocab_small",
                        {"draft_vocab=4", "head_input=feature_unshifted_token", "head_seed=1"}}};
    d.make = [](const StrategyContext& context, const StrategyOptions& options) -> std::unique_ptr<DraftStrategy> {
      TreeSpec spec = load_tree_spec(resolve_tree_path(options.get_string("tree")));
      // A rank must name an existing token.
      const int64_t vocab = context.target.config().vocab_size;
      for (const auto& p : spec.paths)
        for (int32_t r : p)
          if (r >= vocab)
            throw Error::in_file(spec.source, "path " + path_string(p),
                                 "sibling ranks below the vocabulary size " + std::to_string(vocab), std::to_string(r));
      return std::make_unique<StaticTreeStrategy>(eagle_head_from_options(context, options), std::move(spec));
    };
    return d;
  }();
  return d;
}

}  // namespace draftlab
