#include "strategies/eagle_tree/static_tree.h"
#include "strategies/eagle/eagle_family.h"

#include <algorithm>
#include <utility>

#include "core/base/error.h"
#include "strategies/eagle_tree/eagle_drafter.h"
#include "strategies/eagle_tree/eagle_tree.h"

namespace draftlab {

namespace {

// The spec's tree, a depth at a time: the parents of the next depth's paths (siblings are contiguous), each
// expanded once; at T = 0 the child of rank r is the head's r-th most probable token. At T > 0 with sample_tree, each
// parent's children are draws without replacement from the head's processed distribution q (the decoding's
// temperature, top-k, top-p), in sibling order (EAGLE-1); a parent whose q has fewer tokens with mass than it has
// children gets only that many, and the paths it could not fill are left out with their subtrees.
class StaticTreePolicy : public TreePolicy {
 public:
  StaticTreePolicy(const TreeSpec& spec, const DraftRequest& request, bool sample_tree)
      : spec_(spec), sample_tree_(sample_tree) {
    // Paths are sorted by depth, so a prefix of them is the tree cut at any depth or size, still connected.
    while (count_ < spec.size() && static_cast<int32_t>(spec.paths[count_].size()) <= request.tokens_wanted) ++count_;
    count_ = std::min(count_, request.max_nodes);
    node_of_.assign(static_cast<size_t>(count_), kMissing);
  }

  std::vector<int32_t> next_frontier(const DraftTree&) override {
    std::vector<int32_t> frontier;
    while (frontier.empty() && next_ < count_) {
      lo_ = hi_ = next_;
      const size_t depth = spec_.paths[lo_].size();
      while (hi_ < count_ && spec_.paths[hi_].size() == depth) ++hi_;
      next_ = hi_;
      slot_.clear();
      children_.clear();
      k_ = 1;
      for (int32_t i = lo_; i < hi_; ++i) {
        const int32_t parent = spec_.parent[i] < 0 ? EagleDrafter::kRoot : node_of_[spec_.parent[i]];
        if (parent == kMissing) {
          slot_.push_back(-1);
          continue;
        }
        if (frontier.empty() || frontier.back() != parent) {
          frontier.push_back(parent);
          children_.push_back(0);
        }
        slot_.push_back(static_cast<int32_t>(frontier.size()) - 1);
        ++children_.back();
        k_ = std::max<int64_t>(k_, spec_.paths[i].back() + 1);
      }
    }
    frontier_ = frontier;
    return frontier;
  }

  void grow(DraftTree& tree, const at::Tensor& logits, Sampler& sampler) override {
    if (sample_tree_ && !sampler.params().greedy()) {
      // Each parent's draws, in sibling order; path i takes its parent's next draw (none when q ran out).
      std::vector<std::vector<int32_t>> drawn(frontier_.size());
      for (size_t f = 0; f < frontier_.size(); ++f)
        drawn[f] = add_sampled_children(tree, frontier_[f], sampler.distribution(logits[static_cast<int64_t>(f)]),
                                        children_[f], sampler);
      std::vector<size_t> used(frontier_.size(), 0);
      for (int32_t i = lo_; i < hi_; ++i) {
        const int32_t f = slot_[i - lo_];
        if (f >= 0 && used[f] < drawn[f].size()) node_of_[i] = drawn[f][used[f]++];
      }
      return;
    }
    const auto candidates = top_candidates(logits, k_);
    for (int32_t i = lo_; i < hi_; ++i) {
      const int32_t f = slot_[i - lo_];
      if (f < 0) continue;
      const Candidates& c = candidates[f];
      const auto rank = static_cast<size_t>(spec_.paths[i].back());
      node_of_[i] = tree.add(c.tokens[rank], frontier_[f], c.probs[rank]);
    }
  }

 private:
  static constexpr int32_t kMissing = -2;  // a path whose parent was not drawn: left out with its subtree
  const TreeSpec& spec_;
  bool sample_tree_;
  int32_t count_ = 0, next_ = 0;  // the paths drafted this cycle; the first of the next depth
  std::vector<int32_t> node_of_;  // per path: its tree node, or kMissing
  // The level in progress: paths [lo_, hi_), slot_[i - lo_] = path i's parent in frontier_ (-1: missing), the
  // children each frontier node gets, the largest rank asked for.
  int32_t lo_ = 0, hi_ = 0;
  std::vector<int32_t> slot_, children_, frontier_;
  int64_t k_ = 1;
};

class StaticTreeStrategy : public EagleTreeStrategy {
 public:
  StaticTreeStrategy(std::shared_ptr<const FeatureHead> head, TreeSpec spec, bool sample_tree)
      : EagleTreeStrategy(std::move(head)), spec_(std::move(spec)), sample_tree_(sample_tree) {}

  std::string name() const override { return "static-tree"; }

  // The tree is drafted depth by depth; in a batch every sequence's depth d in one head forward (eagle_tree.h).
  std::vector<DraftTree> propose_batch(const std::vector<DraftStrategy*>& peers,
                                       const std::vector<DraftRequest>& requests) override {
    const auto trees_of = peers_as<StaticTreeStrategy>(peers);
    std::vector<StaticTreePolicy> policies;
    policies.reserve(trees_of.size());
    std::vector<EagleDrafter*> drafters;
    std::vector<TreePolicy*> grown;
    for (size_t b = 0; b < trees_of.size(); ++b) {
      policies.emplace_back(trees_of[b]->spec_, requests[b], trees_of[b]->sample_tree_);
      drafters.push_back(&trees_of[b]->drafter_);
      grown.push_back(&policies[b]);
    }
    return grow_trees(drafters, requests, grown);
  }

 private:
  TreeSpec spec_;
  bool sample_tree_ = true;
};

}  // namespace

const StrategyDescriptor& static_tree_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "static-tree";
    d.summary = "EAGLE-1: the same tree of sibling ranks every cycle, filled by an EAGLE head";
    d.needs = StrategyNeeds::Head;
    d.head_family = eagle_heads().name;
    d.shape = DraftShape::StaticTree;
    d.has_confidence = true;
    d.options = {text_option("tree", "mc_sim_7b_63", "a tree file (JSON paths of sibling ranks) or a name under data/trees"),
                 bool_option("sample_tree", true,
                             "T > 0: each node's children drawn without replacement from the head's distribution, as "
                             "EAGLE-1; false: its top-k (EAGLE-2's way)")};
    for (auto& o : eagle_head_options(eagle_heads())) d.options.push_back(o);
    d.check_options = [](const StrategyOptions& o) { check_eagle_head_options(eagle_heads(), o); };
    // The default tree; and a 4-token draft vocabulary whose ranks run past it (probability-0 candidates).
    d.test_variants = {{"static_tree", {}},
                       {"static_tree_draft_vocab_small",
                        {"draft_vocab=4", "head_input=feature_unshifted_token", "head_seed=1"}},
                       {"static_tree_top_k", {"sample_tree=false"}}};
    d.make = [](const StrategyContext& context, const StrategyOptions& options) -> std::unique_ptr<DraftStrategy> {
      TreeSpec spec = load_tree_spec(resolve_tree_path(options.get_string("tree")));
      // A rank must name an existing token.
      const int64_t vocab = context.target.config().vocab_size;
      for (const auto& p : spec.paths)
        for (int32_t r : p)
          if (r >= vocab)
            throw Error::in_file(spec.source, "path " + path_string(p),
                                 "sibling ranks below the vocabulary size " + std::to_string(vocab), std::to_string(r));
      return std::make_unique<StaticTreeStrategy>(eagle_head_from_options(context, options, eagle_heads()), std::move(spec),
                                                  options.get_bool("sample_tree"));
    };
    return d;
  }();
  return d;
}

}  // namespace draftlab
