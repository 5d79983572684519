#include "strategies/eagle_chain.h"

#include <algorithm>

#include "core/base/error.h"
#include "strategies/eagle_drafter.h"

namespace draftlab {

namespace {

class EagleChainStrategy : public DraftStrategy {
 public:
  EagleChainStrategy(std::shared_ptr<const FeatureHead> head, int32_t depth)
      : drafter_(std::move(head)), depth_(depth) {}

  std::string name() const override { return "eagle-chain"; }
  std::vector<int64_t> target_feature_layers() const override { return drafter_.head().target_feature_layers(); }

  void begin(const std::vector<int64_t>& prompt, const at::Tensor& features, int64_t first) override {
    drafter_.begin(prompt, features, first);
  }
  void observe(const VerifyResult& result) override { drafter_.observe(result); }

  DraftTree propose(const DraftRequest& request) override { return propose_batch({this}, {request})[0]; }

  // Every sequence's chain grows one token per step, one head forward for all of them (EagleDrafter::expand_batch).
  std::vector<DraftTree> propose_batch(const std::vector<DraftStrategy*>& peers,
                                       const std::vector<DraftRequest>& requests) override {
    const auto chains = peers_of_type<EagleChainStrategy>(peers);
    if (chains.empty()) return DraftStrategy::propose_batch(peers, requests);
    const size_t B = chains.size();
    std::vector<DraftTree> trees(B);
    std::vector<int32_t> depth(B), last(B, EagleDrafter::kRoot);
    int32_t steps = 0;
    for (size_t i = 0; i < B; ++i) {
      chains[i]->drafter_.start_tree(requests[i]);
      depth[i] = std::min({chains[i]->depth_, requests[i].tokens_wanted, requests[i].max_nodes});
      steps = std::max(steps, depth[i]);
    }
    // depth - 1 head forwards: the first token comes from the root prediction of the last sync.
    for (int32_t step = 0; step < steps; ++step) {
      std::vector<size_t> growing;
      std::vector<EagleDrafter*> drafters;
      std::vector<const DraftTree*> grown;
      std::vector<std::vector<int32_t>> frontiers;
      for (size_t i = 0; i < B; ++i) {
        if (step >= depth[i]) continue;
        growing.push_back(i);
        drafters.push_back(&chains[i]->drafter_);
        grown.push_back(&trees[i]);
        frontiers.push_back({last[i]});
      }
      const auto logits = EagleDrafter::expand_batch(drafters, grown, frontiers);
      for (size_t g = 0; g < growing.size(); ++g) {
        const size_t i = growing[g];
        Sampler& sampler = requests[i].sampler;
        if (sampler.params().greedy()) {
          const Candidates best = top_candidates(logits[g], 1)[0];
          last[i] = trees[i].add(best.tokens[0], last[i], best.probs[0]);
        } else {
          const at::Tensor q = sampler.distribution(logits[g][0]);  // float32 CPU, what the verifier divides by
          const int64_t token = sampler.sample_from(q);
          const float qx = q.data_ptr<float>()[token];
          last[i] = trees[i].add(token, last[i], qx, trees[i].add_distribution(q));
        }
      }
    }
    return trees;
  }

  void observe_batch(const std::vector<DraftStrategy*>& peers, const std::vector<const VerifyResult*>& results) override {
    const auto chains = peers_of_type<EagleChainStrategy>(peers);
    if (chains.empty()) return DraftStrategy::observe_batch(peers, results);
    std::vector<EagleDrafter*> drafters;
    for (auto* c : chains) drafters.push_back(&c->drafter_);
    EagleDrafter::observe_batch(drafters, results);
  }

 private:
  EagleDrafter drafter_;
  int32_t depth_;
};

}  // namespace

const StrategyDescriptor& eagle_chain_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "eagle-chain";
    d.summary = "EAGLE head, chain draft (EAGLE's \"w/o tree attention\")";
    d.needs = StrategyNeeds::Head;
    d.shape = DraftShape::Chain;
    d.has_confidence = true;
    d.options = {integer_option("depth", 5, 1, 1024, "tokens drafted per cycle")};
    for (auto& o : eagle_head_options()) d.options.push_back(o);
    // Random heads (mostly rejected drafts); the unshifted input variant; a reduced draft vocabulary.
    d.test_variants = {{"eagle_chain", {"depth=5"}},
                       {"eagle_chain_unshifted", {"depth=4", "head_input=feature_unshifted_token"}},
                       {"eagle_chain_draft_vocab", {"depth=4", "draft_vocab=6", "head_seed=1"}}};
    d.make = [](const StrategyContext& context, const StrategyOptions& options) -> std::unique_ptr<DraftStrategy> {
      return std::make_unique<EagleChainStrategy>(eagle_head_from_options(context, options),
                                                  static_cast<int32_t>(options.get_int("depth")));
    };
    return d;
  }();
  return d;
}

}  // namespace draftlab
