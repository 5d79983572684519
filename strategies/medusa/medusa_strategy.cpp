// medusa: Medusa-1 (Cai et al. 2024) on a frozen target, verified losslessly.
//
// Each cycle reads one vector, the target's feature of the token before the root (the last row of the verified
// features: VerifyResult::features' last row, or the prompt's last feature after prefill), runs the K heads on it
// (strategies/medusa/medusa_heads.h; head k predicts the token k + 2 positions after that feature, i.e. depth k + 1
// below the root) and fills the tree: the node at path (c_1 .. c_d) gets head (d - 1)'s c_d-th most probable
// token, with that head's softmax probability as its confidence. Default tree: Medusa's own mc_sim_7b_63 for four
// heads (data/trees/medusa_mc_sim_7b_63.json), or a top-k Cartesian tree; paths deeper than the heads are cut, and
// ranks past the vocabulary are dropped with their subtrees.
//
// Drafts are deterministic top-k choices at every temperature, so the verifier treats them as point masses:
// greedy verification at T = 0, multi-round speculative sampling at T > 0; the output is the target's. Medusa's
// own "typical acceptance" (accepting tokens the target finds plausible enough) changes the output distribution;
// it is not offered. Neither is Medusa-2 (heads trained jointly with the target).
#include <algorithm>

#include "core/base/error.h"
#include "strategies/medusa/medusa_heads.h"
#include "strategies/parallel_heads/parallel_heads.h"
#include "strategies/registry.h"

namespace draftlab {

namespace {

class MedusaStrategy : public ParallelHeadStrategy {
 public:
  MedusaStrategy(std::shared_ptr<const MedusaHeads> heads, TreeSpec spec)
      : ParallelHeadStrategy("medusa", std::move(spec), heads->num_heads()), heads_(std::move(heads)) {}

  DraftTree propose(const DraftRequest& request) override {
    const TreeSpec& tree_spec = spec();
    const int32_t count = usable(request);
    DraftTree tree;
    if (count == 0) return tree;
    const auto deepest = static_cast<int64_t>(tree_spec.paths[count - 1].size());
    // Head d - 1's top ranks as far as depth d's nodes reach.
    std::vector<int64_t> ranks(static_cast<size_t>(deepest), 0);
    for (int32_t i = 0; i < count; ++i) {
      auto& r = ranks[tree_spec.paths[i].size() - 1];
      r = std::max<int64_t>(r, tree_spec.paths[i].back() + 1);
    }
    const at::Tensor logits = heads_->logits(feature(), deepest).to(at::kCPU).contiguous();
    const int64_t vocab = logits.size(1);
    std::vector<TopTokens> top;
    for (int64_t k = 0; k < deepest; ++k) top.push_back(top_tokens(logits.data_ptr<float>() + k * vocab, vocab, ranks[k]));

    std::vector<int32_t> node(static_cast<size_t>(count), -1);  // tree node of each spec path, -1 when dropped
    for (int32_t i = 0; i < count; ++i) {
      const auto& path = tree_spec.paths[i];
      const int32_t parent = tree_spec.parent[i] < 0 ? -1 : node[tree_spec.parent[i]];
      const TopTokens& t = top[path.size() - 1];
      const auto rank = static_cast<size_t>(path.back());
      if ((tree_spec.parent[i] >= 0 && parent < 0) || rank >= t.tokens.size()) continue;
      node[i] = tree.add(t.tokens[rank], parent, t.probs[rank]);
    }
    return tree;
  }

 private:
  std::shared_ptr<const MedusaHeads> heads_;
};

std::shared_ptr<const MedusaHeads> heads_from_options(const StrategyContext& context, const StrategyOptions& options) {
  const std::string path = options.get_string("head");
  if (!path.empty()) {
    check_no_random_head_options(options, {"head_seed", "heads", "lm_head"});
    return MedusaHeads::load(path, context.target);
  }
  MedusaConfig c;
  c.num_heads = options.get_int("heads");
  c.own_lm_head = options.get_string("lm_head") == "own";
  return MedusaHeads::random(context.target, static_cast<uint64_t>(options.get_int("head_seed")), c);
}

}  // namespace

const StrategyDescriptor& medusa_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "medusa";
    d.summary = "Medusa-1: K heads on the target's last feature fill a static tree (head k: depth k + 1)";
    d.needs = StrategyNeeds::Head;
    d.head_family = "medusa";
    d.shape = DraftShape::StaticTree;
    d.has_confidence = true;
    d.options = {path_option("head", false, "trained Medusa heads of the target (a folder); absent: random heads (tests)"),
                 integer_option("head_seed", 0, 0, 1000000, "the random heads' seed"),
                 integer_option("heads", 4, 1, 32, "the random heads' count"),
                 choice_option("lm_head", {"shared", "own"}, "the random heads' LM head: the target's, or a copy each")};
    for (auto& o : parallel_head_tree_options("medusa_mc_sim_7b_63")) d.options.push_back(o);
    // Medusa's tree (ranks up to 9, past the sampling test's 8-token vocabulary), also cut to two heads; a
    // Cartesian tree over own LM heads. Each puts several children under the root, so that the sampling test's
    // wrong-rule control has drafts to reject.
    d.test_variants = {{"medusa", {}},
                       {"medusa_cartesian_own_lm_head", {"tree=cartesian", "top_k=4", "heads=2", "lm_head=own", "head_seed=1"}},
                       {"medusa_two_heads", {"heads=2", "head_seed=2"}}};
    d.make = [](const StrategyContext& context, const StrategyOptions& options) -> std::unique_ptr<DraftStrategy> {
      auto heads = heads_from_options(context, options);
      TreeSpec spec = parallel_head_tree(options, static_cast<int32_t>(heads->num_heads()));
      return std::make_unique<MedusaStrategy>(std::move(heads), std::move(spec));
    };
    return d;
  }();
  return d;
}

}  // namespace draftlab
