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
    const int32_t depth = std::min({depth_, request.max_depth, request.max_nodes});
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

std::unique_ptr<DraftStrategy> make_eagle_chain_strategy(const StrategyContext& context,
                                                         const StrategyOptions& options) {
  const int64_t depth = options.get_int("depth", 5);
  check(depth >= 1 && depth <= 1024, "option depth: expected an integer in [1, 1024], got " + std::to_string(depth));
  return std::make_unique<EagleChainStrategy>(eagle_head_from_options(context, options), static_cast<int32_t>(depth));
}

}  // namespace draftlab
