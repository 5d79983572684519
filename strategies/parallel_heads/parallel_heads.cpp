#include "strategies/parallel_heads/parallel_heads.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/base/error.h"

namespace draftlab {

namespace {

constexpr const char* kCartesian = "cartesian";
constexpr int64_t kMaxCartesianNodes = 4096;

void add_paths(std::vector<int32_t>& prefix, int32_t top_k, int32_t depth, std::string& json) {
  for (int32_t r = 0; r < top_k; ++r) {
    prefix.push_back(r);
    json += json.back() == '[' ? "[" : ", [";
    for (size_t i = 0; i < prefix.size(); ++i) json += (i ? ", " : "") + std::to_string(prefix[i]);
    json += "]";
    if (static_cast<int32_t>(prefix.size()) < depth) add_paths(prefix, top_k, depth, json);
    prefix.pop_back();
  }
}

}  // namespace

void ParallelHeadStrategy::begin(const std::vector<int64_t>&, const at::Tensor& prompt_features, int64_t) {
  check(prompt_features.dim() == 2 && prompt_features.size(0) > 0, name_ + ": expected the prompt's features [P, d]");
  feature_ = prompt_features[prompt_features.size(0) - 1];
}

void ParallelHeadStrategy::observe(const VerifyResult& result) { feature_ = result.features[result.features.size(0) - 1]; }

int32_t ParallelHeadStrategy::usable(const DraftRequest& request) const {
  check(feature_.defined(), name_ + ": propose() before begin()");
  const int32_t depth = std::min<int32_t>(request.tokens_wanted, static_cast<int32_t>(heads_));
  return usable_paths(spec_, depth, request.max_nodes);
}

std::vector<OptionSpec> parallel_head_tree_options(const std::string& default_tree) {
  return {text_option("tree", default_tree,
                      "a tree file (JSON paths of sibling ranks) or a name under data/trees, or cartesian (top_k "
                      "children per node down to the last head)"),
          integer_option("top_k", 2, 1, 64, "tree=cartesian: children per node")};
}

TreeSpec cartesian_tree(int32_t top_k, int32_t depth) {
  check(top_k >= 1 && depth >= 1, "cartesian tree: expected top_k >= 1 and depth >= 1");
  int64_t nodes = 0;
  for (int64_t level = 1, width = 1; level <= depth; ++level) {
    width *= top_k;
    nodes += width;
    check(nodes <= kMaxCartesianNodes, "option top_k: a cartesian tree of top_k " + std::to_string(top_k) + " and depth " +
                                           std::to_string(depth) + " has more than " +
                                           std::to_string(kMaxCartesianNodes) + " nodes");
  }
  const std::string name = "cartesian top_k=" + std::to_string(top_k) + " depth=" + std::to_string(depth);
  std::string json = "{\"name\": \"" + name + "\", \"paths\": [";
  std::vector<int32_t> prefix;
  add_paths(prefix, top_k, depth, json);
  return parse_tree_spec(json + "]}", name);
}

TreeSpec parallel_head_tree(const StrategyOptions& options, int32_t depth) {
  const std::string tree = options.get_string("tree");
  if (tree == kCartesian) return cartesian_tree(static_cast<int32_t>(options.get_int("top_k")), depth);
  if (options.given("top_k"))
    throw Error("option top_k: shapes tree=cartesian only, but tree=" + tree + " was given");
  TreeSpec spec = load_tree_spec(resolve_tree_path(tree));
  // Sorted by depth: the paths no deeper than the last head are a prefix, parents included.
  const int32_t keep = usable_paths(spec, depth, spec.size());
  spec.paths.resize(static_cast<size_t>(keep));
  spec.parent.resize(static_cast<size_t>(keep));
  return spec;
}

int32_t usable_paths(const TreeSpec& spec, int32_t max_depth, int32_t max_nodes) {
  int32_t count = 0;
  while (count < spec.size() && static_cast<int32_t>(spec.paths[count].size()) <= max_depth) ++count;
  return std::max(0, std::min(count, max_nodes));
}

void check_no_random_head_options(const StrategyOptions& options, std::initializer_list<const char*> keys) {
  for (const char* key : keys)
    if (options.given(key))
      throw Error(std::string("option ") + key + ": shapes random heads, but head=" + options.get_string("head") +
                  " was given (its config.json says what they are)");
}

TopTokens top_tokens(const float* logits, int64_t vocab, int64_t k) {
  k = std::min(k, vocab);
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  // The softmax denominator: float exponentials (a vocabulary of them per head and cycle), summed in double.
  const float max = logits[ids[0]];
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(logits[i] - max);
  TopTokens out;
  for (int64_t r = 0; r < k; ++r) {
    const int32_t id = ids[static_cast<size_t>(r)];
    out.tokens.push_back(id);
    out.probs.push_back(static_cast<float>(std::exp(logits[id] - max) / sum));
  }
  return out;
}

}  // namespace draftlab
