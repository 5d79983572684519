#include "strategies/eagle_tree/eagle_chain.h"
#include "strategies/eagle/eagle_family.h"

#include <algorithm>

#include "core/base/error.h"
#include "strategies/chain_budget.h"
#include "strategies/eagle_tree/eagle_drafter.h"
#include "strategies/eagle_tree/eagle_tree.h"

namespace draftlab {

namespace {

// A chain: the last node's best child (T = 0), or one drawn from the head's processed distribution q, recorded with
// q so the verifier accepts with min(1, p/q). depth levels, the first from the root prediction of the last sync;
// with depth=auto, fewer when the budget says another token cannot pay (chain_budget.h).
struct ChainPolicy : TreePolicy {
  int32_t depth = 0;
  int32_t last = EagleDrafter::kRoot;
  ChainBudget* budget = nullptr;  // depth=auto
  bool stopped = false;

  // Called again after it says done (grow_trees asks every policy each level): `stopped` keeps the answer.
  std::vector<int32_t> next_frontier(const DraftTree& tree) override {
    if (stopped) return {};
    bool more = tree.size() < depth;
    // The budget sees every drafted token once, the last one too (its values are what finish() cuts by).
    if (budget && tree.size() > 0) more = budget->another(tree.node(last)) && more;
    stopped = !more;
    return more ? std::vector<int32_t>{last} : std::vector<int32_t>{};
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
  EagleChainStrategy(std::shared_ptr<const FeatureHead> head, int32_t depth, std::optional<ChainBudget> budget)
      : EagleTreeStrategy(std::move(head)), depth_(depth), budget_(std::move(budget)) {}

  std::string name() const override { return "eagle-chain"; }

  void begin(const std::vector<int64_t>& prompt, const at::Tensor& features, int64_t first) override {
    EagleTreeStrategy::begin(prompt, features, first);
    if (budget_) budget_->begin();
  }

  // Every sequence's chain grows one token per level, one head forward for all of them (eagle_tree.h).
  std::vector<DraftTree> propose_batch(const std::vector<DraftStrategy*>& peers,
                                       const std::vector<DraftRequest>& requests) override {
    const auto chains = peers_as<EagleChainStrategy>(peers);
    std::vector<ChainPolicy> policies(chains.size());
    std::vector<EagleDrafter*> drafters;
    std::vector<TreePolicy*> grown;
    for (size_t i = 0; i < chains.size(); ++i) {
      EagleChainStrategy& c = *chains[i];
      policies[i].depth = std::min({c.depth_, requests[i].tokens_wanted, requests[i].max_nodes});
      drafters.push_back(&c.drafter_);
      grown.push_back(&policies[i]);
      c.skipped_ = false;
      if (!c.budget_ || policies[i].depth <= 0) continue;
      // depth=auto: no draft when none pays (the head's sync deferred), else the budget decides level by level.
      if (!c.budget_->drafts_this_cycle()) {
        c.skipped_ = true;
        grown.back() = nullptr;
        continue;
      }
      policies[i].budget = &*c.budget_;
      c.budget_->start(policies[i].depth, requests[i].batch_size);
    }
    std::vector<DraftTree> trees = grow_trees(drafters, requests, grown);
    for (size_t i = 0; i < chains.size(); ++i)
      if (policies[i].budget) policies[i].budget->finish(trees[i], requests[i].sampler.params().greedy());
    return trees;
  }

  void observe_batch(const std::vector<DraftStrategy*>& peers, const std::vector<const VerifyResult*>& results) override {
    EagleTreeStrategy::observe_batch(peers, results);
    const auto chains = peers_as<EagleChainStrategy>(peers);
    for (size_t i = 0; i < chains.size(); ++i)
      if (chains[i]->budget_) chains[i]->budget_->observe(results[i]->matched());  // a skipped cycle is ignored
  }

 private:
  bool skipped_this_cycle() const override { return skipped_; }

  int32_t depth_;
  std::optional<ChainBudget> budget_;  // depth=auto
  bool skipped_ = false;               // depth=auto chose not to draft this cycle
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
    d.options = {integer_option("depth", 5, 1, 1024,
                                "tokens drafted per cycle; auto: chosen token by token from the measured verify cost, "
                                "the head's time per token and the calibrated confidences (none when none pays)")
                     .also("auto")};
    for (auto& o : chain_budget_options("depth", "max_auto_depth")) d.options.push_back(o);
    for (auto& o : eagle_head_options(eagle_heads())) d.options.push_back(o);
    d.check_options = [](const StrategyOptions& o) {
      check_eagle_head_options(eagle_heads(), o);
      automatic_budget("eagle-chain", o, "depth");
    };
    // Random heads (mostly rejected drafts); the unshifted input variant; a reduced draft vocabulary.
    d.test_variants = {{"eagle_chain", {"depth=5"}},
                       {"eagle_chain_unshifted", {"depth=4", "head_input=feature_unshifted_token"}},
                       {"eagle_chain_draft_vocab", {"depth=4", "draft_vocab=6", "head_seed=1"}},
                       // depth=auto on fixed costs (drafts independent of the clock), cheap enough to keep drafting.
                       {"eagle_chain_auto", {"depth=auto", "max_auto_depth=6", "auto_cost=1/0.001/0.001"}}};
    d.make = [](const StrategyContext& context, const StrategyOptions& options) -> std::unique_ptr<DraftStrategy> {
      auto budget = chain_budget_from(context.target, "eagle-chain", options, "depth", "max_auto_depth");
      const int32_t depth = budget ? budget->max_depth() : static_cast<int32_t>(options.get_int("depth"));
      return std::make_unique<EagleChainStrategy>(eagle_head_from_options(context, options, eagle_heads()), depth,
                                                  std::move(budget));
    };
    return d;
  }();
  return d;
}

}  // namespace draftlab
