#include "strategies/eagle_tree/eagle_chain.h"
#include "strategies/eagle/eagle_family.h"

#include <algorithm>

#include "core/base/error.h"
#include "strategies/eagle_tree/eagle_drafter.h"
#include "strategies/eagle_tree/eagle_tree.h"

namespace draftlab {

namespace {

// A chain: the last node's best child (T = 0), or one drawn from the head's processed distribution q, recorded with
// q so the verifier accepts with min(1, p/q). depth levels, the first from the root prediction of the last sync.
struct ChainPolicy : TreePolicy {
  int32_t depth = 0;
  int32_t last = EagleDrafter::kRoot;

  std::vector<int32_t> next_frontier(const DraftTree& tree) override {
    if (tree.size() >= depth) return {};
    return {last};
  }
  void grow(DraftTree& tree, const at::Tensor& logits, Sampler& sampler) override {
    if (sampler.params().greedy()) {
      const Candidates best = top_candidates(logits, 1)[0];
      last = tree.add(best.tokens[0], last, best.probs[0]);
    } else {
      const at::Tensor q = sampler.distribution(logits[0]);  // float32 CPU, what the verifier divides by
      const int64_t token = sampler.sample_from(q);
      last = tree.add(token, last, q.data_ptr<float>()[token], tree.add_distribution(q));
    }
  }
};

class EagleChainStrategy : public EagleTreeStrategy {
 public:
  EagleChainStrategy(std::shared_ptr<const FeatureHead> head, int32_t depth)
      : EagleTreeStrategy(std::move(head)), depth_(depth) {}

  std::string name() const override { return "eagle-chain"; }

  // Every sequence's chain grows one token per level, one head forward for all of them (eagle_tree.h).
  std::vector<DraftTree> propose_batch(const std::vector<DraftStrategy*>& peers,
                                       const std::vector<DraftRequest>& requests) override {
    const auto chains = peers_as<EagleChainStrategy>(peers);
    std::vector<ChainPolicy> policies(chains.size());
    std::vector<EagleDrafter*> drafters;
    std::vector<TreePolicy*> grown;
    for (size_t i = 0; i < chains.size(); ++i) {
      policies[i].depth = std::min({chains[i]->depth_, requests[i].tokens_wanted, requests[i].max_nodes});
      drafters.push_back(&chains[i]->drafter_);
      grown.push_back(&policies[i]);
    }
    return grow_trees(drafters, requests, grown);
  }

 private:
  int32_t depth_;
};

}  // namespace

const StrategyDescriptor& eagle_chain_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "eagle-chain";
    d.summary = "EAGLE head, chain draft (EAGLE's \"w/o tree attention\")";
    d.needs = StrategyNeeds::Head;
    d.head_family = eagle_heads().name;
    d.shape = DraftShape::Chain;
    d.has_confidence = true;
    d.options = {integer_option("depth", 5, 1, 1024, "tokens drafted per cycle")};
    for (auto& o : eagle_head_options(eagle_heads())) d.options.push_back(o);
    d.check_options = [](const StrategyOptions& o) { check_eagle_head_options(eagle_heads(), o); };
    // Random heads (mostly rejected drafts); the unshifted input variant; a reduced draft vocabulary.
    d.test_variants = {{"eagle_chain", {"depth=5"}},
                       {"eagle_chain_unshifted", {"depth=4", "head_input=feature_unshifted_token"}},
                       {"eagle_chain_draft_vocab", {"depth=4", "draft_vocab=6", "head_seed=1"}}};
    d.make = [](const StrategyContext& context, const StrategyOptions& options) -> std::unique_ptr<DraftStrategy> {
      return std::make_unique<EagleChainStrategy>(eagle_head_from_options(context, options, eagle_heads()),
                                                  static_cast<int32_t>(options.get_int("depth")));
    };
    return d;
  }();
  return d;
}

}  // namespace draftlab
