// The peagle family: P-EAGLE's draft (peagle_head.h), its COD trainer (peagle_training.h) and the strategy peagle:
// one draft forward over the pairs committed since the last cycle, the root pair and k - 1 mask slots gives a chain
// of k tokens. T = 0 drafts each row's argmax; T > 0 samples row i from its own q_i and records it (q_i depends on
// the prefix only: mask slots never read the drafted tokens), so the verifier's min(1, p / q) rule keeps the output
// exactly the target's. k=auto: as pard's (strategies/chain_budget.h), capped by max_auto_k (0: the trained depth).
#include <algorithm>

#include "core/base/error.h"
#include "strategies/chain_budget.h"
#include "strategies/peagle/peagle_head.h"
#include "strategies/peagle/peagle_training.h"
#include "strategies/registry.h"

namespace draftlab {

namespace {

class PEagleStrategy : public SequenceStrategy {
 public:
  // budget: k=auto (k is then its max_depth()).
  PEagleStrategy(std::shared_ptr<const PEagleHead> head, int64_t k, std::optional<ChainBudget> budget)
      : head_(std::move(head)), k_(k), capacity_(head_->target().config().max_position_embeddings),
        budget_(std::move(budget)) {}

  std::string name() const override { return "peagle"; }
  std::vector<int64_t> target_feature_layers() const override { return head_->target_feature_layers(); }

  void begin(const std::vector<int64_t>& prompt, const at::Tensor& features, int64_t) override {
    cache_ = head_->make_cache(capacity_);
    if (budget_) budget_->begin();
    const int64_t n = static_cast<int64_t>(prompt.size());
    in_step_ = features.defined() && features.size(0) == n && n <= capacity_;
    if (!in_step_) return;
    features_ = at::empty({capacity_, features.size(1)}, features.options());
    features_.narrow(0, 0, n).copy_(features);
    count_ = n;
  }

  DraftTree propose(const DraftRequest& request) override {
    const auto n = static_cast<int64_t>(request.sequence.size());
    // Pairs 0..n-2 need the features of positions 0..n-2 (a sequence from elsewhere: draft nothing).
    if (!in_step_ || n < 2 || count_ != n - 1) return {};
    const int64_t most = budget_ ? budget_->reach() : k_;
    const int64_t depth = std::min<int64_t>({most, request.tokens_wanted, request.max_nodes, capacity_ - n});
    if (depth < 1) return {};
    if (budget_ && !budget_->drafts_this_cycle()) return {};  // the pairs are fed in the next drafting cycle
    if (budget_) budget_->start(static_cast<int32_t>(depth), request.batch_size, true);
    const int64_t first = cache_.length;  // pairs first..n-2 are not cached yet; n-2 is the root
    std::vector<int64_t> tokens(request.sequence.begin() + first + 1, request.sequence.end());
    const at::Tensor logits =
        head_->draft(cache_, tokens, features_.narrow(0, first, n - 1 - first), depth).to(at::kCPU);  // [depth, V]
    return chain_of_slots(logits, request.sampler, budget_ ? &*budget_ : nullptr);
  }

  void observe(const VerifyResult& result) override {
    if (budget_) budget_->observe(static_cast<int64_t>(result.accepted_nodes.size()));
    if (!in_step_ || !result.features.defined() || count_ + result.features.size(0) > capacity_) {
      in_step_ = false;  // no features, or past the context: nothing more to draft
      return;
    }
    features_.narrow(0, count_, result.features.size(0)).copy_(result.features);
    count_ += result.features.size(0);
  }

 private:
  std::shared_ptr<const PEagleHead> head_;
  int64_t k_, capacity_;
  PEagleHead::Cache cache_;  // the pairs drafted from so far (all committed)
  at::Tensor features_;      // [capacity, 3d]: the target's fused features of positions 0..count_-1
  int64_t count_ = 0;
  bool in_step_ = false;     // features_ mirrors the sequence up to the root
  std::optional<ChainBudget> budget_;  // k=auto
};

// A random draft (no head=) is trained for `depths` slots.
std::shared_ptr<const PEagleHead> head_from(const StrategyContext& context, const StrategyOptions& o, int64_t depths) {
  const std::string path = o.get_string("head");
  if (!path.empty()) return PEagleHead::load(path, context.target);
  return PEagleHead::random(context.target, static_cast<uint64_t>(o.get_int("head_seed")), 2,
                            std::max<int64_t>(1, depths));
}

// --cod r,r_min.
std::pair<double, double> parse_cod(const std::string& text) {
  double a = 0, b = 0;
  check(parse_option_number_pair(text, &a, &b) && a > 0 && a <= 1 && b >= 0 && b <= a,
        "--cod: expected r,r_min with 0 <= r_min <= r <= 1 (SpecForge's 0.8,0.2), got '" + text + "'");
  return {a, b};
}

HeadTrainingResult train(const HeadTrainingRun& run) {
  PEagleTrainingOptions o;
  static_cast<HeadTrainingOptions&>(o) = run.common;
  o.layers = run.options.get_int("draft-layers");
  o.depths = run.options.get_int("depths");
  std::tie(o.cod_ratio, o.cod_min) = parse_cod(run.options.get_string("cod"));
  o.draft_vocab = run.options.get_int("draft-vocab");
  o.mask_token = run.options.get_int("mask-token");
  o.train_embedding = run.options.get_bool("train-embedding");
  return train_peagle_head(run.target, o, run.data);
}

}  // namespace

const StrategyDescriptor& peagle_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "peagle";
    d.summary = "P-EAGLE: an EAGLE-3 head of N layers drafts k tokens in one forward (the root and k - 1 mask slots)";
    d.needs = StrategyNeeds::Head;
    d.head_family = "peagle";
    d.shape = DraftShape::Chain;
    d.has_confidence = true;
    d.options = {path_option("head", false, "a trained P-EAGLE draft of the target (a folder); absent: random (tests)"),
                 integer_option("head_seed", 0, 0, 1000000, "the random draft's seed"),
                 integer_option("k", 0, 0, 64,
                                "tokens drafted per cycle, in one forward (0: the draft's trained depth); auto: as many "
                                "as pay under the measured verify cost and the calibrated confidences (none when none "
                                "pays)")
                     .also("auto")};
    for (auto& o : chain_budget_options("k", "max_auto_k", 0, "the draft's trained depth")) d.options.push_back(o);
    d.check_options = [](const StrategyOptions& o) { automatic_budget("peagle", o, "k"); };
    // A random draft's slots are seldom accepted at T 1.5: the wrong-rule control runs hot (T 8).
    d.test_variants = {with_control_temperature({"peagle", {"k=3"}}, 8.0),
                       // k=auto on fixed costs (drafts independent of the clock), cheap enough to keep drafting.
                       with_control_temperature({"peagle_auto", {"k=auto", "max_auto_k=4", "auto_cost=1/0.001/0.001"}},
                                                8.0)};
    d.make = [](const StrategyContext& context, const StrategyOptions& options) -> std::unique_ptr<DraftStrategy> {
      const bool automatic = automatic_budget("peagle", options, "k");
      auto head = head_from(context, options, options.get_int(automatic ? "max_auto_k" : "k"));
      const int64_t trained = head->config().depths;
      if (automatic) {
        int64_t most = options.get_int("max_auto_k");
        if (most == 0) most = trained;
        ChainBudget budget(context.target, static_cast<int32_t>(most),
                           parse_auto_cost("peagle", options.get_string("auto_cost")));
        return std::make_unique<PEagleStrategy>(std::move(head), most, std::move(budget));
      }
      int64_t k = options.get_int("k");
      if (k == 0) k = trained;
      return std::make_unique<PEagleStrategy>(std::move(head), k, std::nullopt);
    };
    return d;
  }();
  return d;
}

const HeadFamily& peagle_heads() {
  static const HeadFamily f = [] {
    HeadFamily f;
    f.name = "peagle";
    f.title = "P-EAGLE draft";
    f.summary = "P-EAGLE: EAGLE-3's fused features and first layer, N layers, a learned mask_hidden for K - 1 mask "
                "slots, its own draft-vocabulary LM head";
    f.recognises = is_peagle_config;
    f.tree_strategy = "peagle";
    f.training_options = {
        integer_option("draft-layers", 2, 1, 16, "the draft's decoder layers"),
        integer_option("depths", 5, 1, 32, "K: rollout depth trained (the draft's default tokens per forward)"),
        text_option("cod", "0.8,0.2", "COD sampling r,r_min: depth d keeps max(r^d, r_min) of the positions"),
        integer_option("draft-vocab", 0, 0, 100000000,
                       "K > 0: the head's own LM head of K rows, the K most frequent tokens predicted under the loss "
                       "mask; 0 = the full vocabulary"),
        integer_option("mask-token", -1, -1, 1 << 30, "the mask id (-1: the highest id absent from the data)"),
        bool_option("train-embedding", false, "train an embedding of its own (SpecForge's), saved as embed_tokens")};
    f.check_training_options = [](const StrategyOptions& o) { parse_cod(o.get_string("cod")); };
    f.train = train;
    return f;
  }();
  return f;
}

const DraftFamily& peagle_family() {
  static const DraftFamily f{"peagle", {&peagle_strategy()}, &peagle_heads()};
  return f;
}

}  // namespace draftlab
