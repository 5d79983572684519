#include "strategies/static_tree.h"

#include <algorithm>
#include <utility>

#include "core/base/error.h"
#include "strategies/eagle_drafter.h"

namespace draftlab {

namespace {

class StaticTreeStrategy : public DraftStrategy {
 public:
  StaticTreeStrategy(std::shared_ptr<const FeatureHead> head, TreeSpec spec, bool sample_tree)
      : drafter_(std::move(head)), spec_(std::move(spec)), sample_tree_(sample_tree) {}

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
    std::vector<DraftTree> trees(B);
    // node_of[b][i]: the tree node of spec path i, or kMissing when a sampled parent ran out of tokens to draw
    // (its distribution had fewer tokens with mass than the shape has children): the path and its subtree are left out.
    constexpr int32_t kMissing = -2;
    std::vector<std::vector<int32_t>> node_of(B);
    std::vector<int32_t> count(B), next(B, 0);
    for (size_t b = 0; b < B; ++b) {
      StaticTreeStrategy& s = *trees_of[b];
      s.drafter_.start_tree(requests[b]);
      // Paths are sorted by depth, so a prefix of them is the tree cut at any depth or size, still connected.
      while (count[b] < s.spec_.size() && static_cast<int32_t>(s.spec_.paths[count[b]].size()) <= requests[b].tokens_wanted)
        ++count[b];
      count[b] = std::min(count[b], requests[b].max_nodes);
      node_of[b].assign(static_cast<size_t>(count[b]), kMissing);
    }
    while (true) {
      // Each unfinished tree's next depth: the parents of its nodes, in order (siblings are contiguous), each
      // expanded once. slot[i - lo]: path i's parent in the frontier (-1: the parent is missing).
      struct Level {
        size_t b;
        int32_t lo, hi;
        std::vector<int32_t> slot;
        std::vector<int32_t> children;  // per frontier entry
        int64_t k = 1;
      };
      std::vector<Level> levels;
      std::vector<EagleDrafter*> drafters;
      std::vector<const DraftTree*> grown;
      std::vector<std::vector<int32_t>> frontiers;
      for (size_t b = 0; b < B; ++b) {
        if (next[b] >= count[b]) continue;
        const TreeSpec& spec = trees_of[b]->spec_;
        Level level{b, next[b], next[b], {}, {}};
        const size_t depth = spec.paths[level.lo].size();
        while (level.hi < count[b] && spec.paths[level.hi].size() == depth) ++level.hi;
        next[b] = level.hi;
        std::vector<int32_t> frontier;
        for (int32_t i = level.lo; i < level.hi; ++i) {
          const int32_t parent = spec.parent[i] < 0 ? EagleDrafter::kRoot : node_of[b][spec.parent[i]];
          if (parent == kMissing) {
            level.slot.push_back(-1);
            continue;
          }
          if (frontier.empty() || frontier.back() != parent) {
            frontier.push_back(parent);
            level.children.push_back(0);
          }
          level.slot.push_back(static_cast<int32_t>(frontier.size()) - 1);
          ++level.children.back();
          level.k = std::max<int64_t>(level.k, spec.paths[i].back() + 1);
        }
        if (frontier.empty()) continue;
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
        Sampler& sampler = requests[level.b].sampler;
        DraftTree& tree = trees[level.b];
        if (trees_of[level.b]->sample_tree_ && !sampler.params().greedy()) {
          // EAGLE-1 at T > 0: each parent's children are draws without replacement from the head's processed
          // distribution q (the decoding's temperature, top-k, top-p), in sibling order; the verifier divides by
          // each sibling's conditional q.
          std::vector<std::vector<int64_t>> draws(frontiers[l].size());
          std::vector<int32_t> q_index(frontiers[l].size());
          std::vector<at::Tensor> q(frontiers[l].size());
          for (size_t f = 0; f < frontiers[l].size(); ++f) {
            q[f] = sampler.distribution(logits[l][static_cast<int64_t>(f)]);
            draws[f] = sampler.sample_without_replacement(q[f], level.children[f]);
            q_index[f] = tree.add_distribution(q[f]);
          }
          std::vector<size_t> used(frontiers[l].size(), 0);
          for (int32_t i = level.lo; i < level.hi; ++i) {
            const int32_t f = level.slot[i - level.lo];
            if (f < 0 || used[f] >= draws[f].size()) continue;  // missing parent, or q ran out of tokens
            const int64_t token = draws[f][used[f]++];
            node_of[level.b][i] = tree.add(token, frontiers[l][f], q[f].data_ptr<float>()[token], q_index[f],
                                           /*without_replacement=*/true);
          }
        } else {
          const auto candidates = top_candidates(logits[l], level.k);
          for (int32_t i = level.lo; i < level.hi; ++i) {
            const int32_t f = level.slot[i - level.lo];
            if (f < 0) continue;
            const Candidates& c = candidates[f];
            const auto rank = static_cast<size_t>(spec.paths[i].back());
            node_of[level.b][i] = tree.add(c.tokens[rank], frontiers[l][f], c.probs[rank]);
          }
        }
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
  bool sample_tree_ = true;
};

}  // namespace

const StrategyDescriptor& static_tree_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "static-tree";
    d.summary = "EAGLE-1: the same tree of sibling ranks every cycle, filled by an EAGLE head";
    d.needs = StrategyNeeds::Head;
    d.shape = DraftShape::StaticTree;
    d.has_confidence = true;
    d.options = {text_option("tree", "mc_sim_7b_63", "a tree file (JSON paths of sibling ranks) or a name under data/trees"),
                 bool_option("sample_tree", true,
                             "T > 0: each node's children drawn without replacement from the head's distribution, as "
                             "EAGLE-1; false: its top-k (EAGLE-2's way)")};
    for (auto& o : eagle_head_options()) d.options.push_back(o);
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
      return std::make_unique<StaticTreeStrategy>(eagle_head_from_options(context, options), std::move(spec),
                                                  options.get_bool("sample_tree"));
    };
    return d;
  }();
  return d;
}

}  // namespace draftlab
