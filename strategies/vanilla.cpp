// vanilla: no draft. Every cycle verifies just the root, i.e. plain autoregressive decoding through the
// speculative loop: the baseline every speedup is measured against, and a check of the loop itself.
#include "strategies/vanilla.h"

namespace draftlab {

namespace {

class VanillaStrategy : public DraftStrategy {
 public:
  std::string name() const override { return "vanilla"; }
  void begin(const std::vector<int64_t>&, const at::Tensor&, int64_t) override {}
  DraftTree propose(const DraftRequest&) override { return {}; }
  void observe(const VerifyResult&) override {}
};

}  // namespace

std::unique_ptr<DraftStrategy> make_vanilla_strategy(const StrategyContext&, const StrategyOptions&) {
  return std::make_unique<VanillaStrategy>();
}

}  // namespace draftlab
