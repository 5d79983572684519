#include "strategies/eagle_chain.h"

#include <algorithm>

#include "core/base/error.h"
#include "strategies/eagle_drafter.h"

namespace draftlab {

namespace {

class EagleChainStrategy : public DraftStrategy {
 public:
  EagleChainStrategy(std::shared_ptr<const EagleHead> head, int32_t depth)
      : drafter_(std::move(head)), depth_(depth) {}

  std::string name() const override { return "eagle-chain"; }

  void begin(const std::vector<int64_t>& prompt, const at::Tensor& features, int64_t first) override {
    drafter_.begin(prompt, features, first);
  }
  void observe(const VerifyResult& result) override { drafter_.observe(result); }

  DraftTree propose(const DraftRequest& request) override {
    drafter_.start_tree(request);
    const int32_t depth = std::min({depth_, request.tokens_wanted, request.max_nodes});
    const bool greedy = request.sampler.params().greedy();
    DraftTree tree;
    int32_t last = EagleDrafter::kRoot;
    // depth - 1 head forwards: the first token comes from the root prediction of the last sync.
    for (int32_t step = 0; step < depth; ++step) {
      const at::Tensor logits = drafter_.expand(tree, {last});
      if (greedy) {
        const Candidates best = top_candidates(logits, 1)[0];
        last = tree.add(best.tokens[0], last, best.probs[0]);
      } else {
        const at::Tensor q = request.sampler.distribution(logits[0]);  // float32 CPU, what the verifier divides by
        const int64_t token = request.sampler.sample_from(q);
        const float qx = q.data_ptr<float>()[token];
        last = tree.add(token, last, qx, tree.add_distribution(q));
      }
    }
    return tree;
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
