// hydra: Hydra (Ankner et al. 2024) on a frozen target, verified losslessly.
//
// The same trees as medusa (strategies/parallel_heads/parallel_heads.h: Medusa's mc_sim_7b_63 by default, or a top-k Cartesian
// tree), filled depth by depth: the node at path (c_1 .. c_d) gets the c_d-th most probable token of head d - 1 run
// on the target's feature of the token before the root and on the tokens of its parent's path (root first), so
// siblings under different parents differ, unlike Medusa's. One batch of head rows per depth, a row per parent that
// has children in the tree (strategies/hydra/hydra_heads.h). Confidence: that head's softmax probability.
//
// Drafts are deterministic top-k choices, so the verifier treats them as point masses: greedy verification at T = 0,
// multi-round speculative sampling at T > 0, and the output is the target's. Hydra's own typical acceptance is not
// offered (it changes the output distribution).
#include <algorithm>
#include <map>

#include "core/base/error.h"
#include "strategies/hydra/hydra_heads.h"
#include "strategies/parallel_heads/parallel_heads.h"
#include "strategies/registry.h"

namespace draftlab {

namespace {

class HydraStrategy : public ParallelHeadStrategy {
 public:
  HydraStrategy(std::shared_ptr<const HydraHeads> heads, TreeSpec spec)
      : ParallelHeadStrategy("hydra", std::move(spec), heads->num_heads()), heads_(std::move(heads)) {}

  DraftTree propose(const DraftRequest& request) override {
    const TreeSpec& tree_spec = spec();
    const int32_t count = usable(request);
    DraftTree tree;
    if (count == 0) return tree;
    std::vector<int32_t> node(static_cast<size_t>(count), -1);  // tree node of each spec path, -1 when dropped
    std::vector<int64_t> token(static_cast<size_t>(count), 0);
    // Paths are sorted by depth: [begin, end) is one depth's run.
    for (int32_t begin = 0; begin < count;) {
      const auto d = static_cast<int32_t>(tree_spec.paths[begin].size());
      int32_t end = begin;
      while (end < count && static_cast<int32_t>(tree_spec.paths[end].size()) == d) ++end;
      // One head row per distinct live parent (-1: the root), reading the parent's path of d tokens.
      std::map<int32_t, size_t> row_of;
      std::map<int32_t, int64_t> ranks;  // per parent: how many top tokens its children need
      std::vector<int64_t> paths;
      for (int32_t i = begin; i < end; ++i) {
        const int32_t p = tree_spec.parent[i];
        if (p >= 0 && node[p] < 0) continue;  // its parent was dropped
        ranks[p] = std::max<int64_t>(ranks[p], tree_spec.paths[i].back() + 1);
        if (row_of.count(p)) continue;
        const size_t row = row_of.size();
        row_of[p] = row;
        const size_t at = paths.size();
        for (int32_t q = p; q >= 0; q = tree_spec.parent[q]) paths.insert(paths.begin() + static_cast<std::ptrdiff_t>(at), token[q]);
        paths.insert(paths.begin() + static_cast<std::ptrdiff_t>(at), request.sequence.back());
      }
      if (row_of.empty()) break;
      const at::Tensor logits = heads_->logits(feature(), d - 1, paths);
      const int64_t vocab = logits.size(1);
      std::map<int32_t, TopTokens> top;
      for (const auto& [p, row] : row_of)
        top[p] = top_tokens(logits.data_ptr<float>() + static_cast<int64_t>(row) * vocab, vocab, ranks[p]);
      for (int32_t i = begin; i < end; ++i) {
        const int32_t p = tree_spec.parent[i];
        const auto rank = static_cast<size_t>(tree_spec.paths[i].back());
        if (!top.count(p) || rank >= top[p].tokens.size()) continue;
        token[i] = top[p].tokens[rank];
        node[i] = tree.add(token[i], p < 0 ? -1 : node[p], top[p].probs[rank]);
      }
      begin = end;
    }
    return tree;
  }

 private:
  std::shared_ptr<const HydraHeads> heads_;
};

std::shared_ptr<const HydraHeads> heads_from_options(const StrategyContext& context, const StrategyOptions& options) {
  const std::string path = options.get_string("head");
  if (!path.empty()) {
    check_no_random_head_options(options, {"head_seed", "heads", "layers", "lm_head"});
    return HydraHeads::load(path, context.target);
  }
  HydraConfig c;
  c.num_heads = options.get_int("heads");
  c.num_layers = options.get_int("layers");
  c.own_lm_head = options.get_string("lm_head") == "own";
  return HydraHeads::random(context.target, static_cast<uint64_t>(options.get_int("head_seed")), c);
}

}  // namespace

const StrategyDescriptor& hydra_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "hydra";
    d.summary = "Hydra: sequentially dependent heads (head k reads the target's last feature and the k + 1 tokens of "
                "the candidate it extends) fill a static tree";
    d.needs = StrategyNeeds::Head;
    d.head_family = "hydra";
    d.shape = DraftShape::StaticTree;
    d.has_confidence = true;
    d.options = {path_option("head", false, "trained Hydra heads of the target (a folder); absent: random heads (tests)"),
                 integer_option("head_seed", 0, 0, 1000000, "the random heads' seed"),
                 integer_option("heads", 4, 1, 32, "the random heads' count"),
                 integer_option("layers", 1, 1, 8, "the random heads' ResBlocks"),
                 choice_option("lm_head", {"shared", "own"}, "the random heads' LM head: the target's, or a copy each")};
    for (auto& o : parallel_head_tree_options("medusa_mc_sim_7b_63")) d.options.push_back(o);
    d.test_variants = {{"hydra", {}},
                       {"hydra_cartesian_own_lm_head", {"tree=cartesian", "top_k=3", "heads=3", "layers=2",
                                                        "lm_head=own", "head_seed=1"}}};
    d.make = [](const StrategyContext& context, const StrategyOptions& options) -> std::unique_ptr<DraftStrategy> {
      auto heads = heads_from_options(context, options);
      TreeSpec spec = parallel_head_tree(options, static_cast<int32_t>(heads->num_heads()));
      return std::make_unique<HydraStrategy>(std::move(heads), std::move(spec));
    };
    return d;
  }();
  return d;
}

}  // namespace draftlab
