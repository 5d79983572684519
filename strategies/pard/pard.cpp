// pard: PARD's parallel draft (AMD-AGI/PARD, pard/pard_infer.py; arXiv 2504.18583). A small LM fine-tuned by
// `train-lm --parallel K` (pard_training.h) drafts k tokens in ONE forward: the new sequence tokens, then k - 1
// copies of its mask id; the logits of the last real token and of each mask slot give d_1 .. d_k. The mask rows
// are rolled back at once, so the draft's cache always mirrors the accepted sequence and the next forward feeds
// only what was accepted since (the accepted drafts and the new root).
//
// T = 0 drafts each slot's argmax. T > 0 samples slot i from its own processed distribution q_i and records it: d_i
// is drawn from a known q_i given the prefix (q_i does not depend on d_1 .. d_{i-1}, which is allowed), so the
// verifier's min(1, p/q) rule keeps the output exactly the target's.
//
// k=auto (strategies/chain_budget.h): each forward draws one slot more than the last chain verified (at most
// max_auto_k), keeps slots while one more may pay under this machine's verify cost, cuts at T = 0 to the best prefix,
// and drafts nothing when no chain pays (but for probes).
#include "strategies/registry.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/base/error.h"
#include "core/decoding/draft_model_cache.h"
#include "strategies/chain_budget.h"

namespace draftlab {

namespace {

class ParallelDraftStrategy : public SequenceStrategy {
 public:
  // budget: k=auto (k is then its max_depth()).
  ParallelDraftStrategy(std::shared_ptr<const LlamaModel> draft, int64_t k, int64_t mask_token,
                        std::optional<ChainBudget> budget)
      : k_(k), mask_token_(mask_token), cache_(std::move(draft)), budget_(std::move(budget)) {}

  std::string name() const override { return "pard"; }

  void begin(const std::vector<int64_t>& prompt, const at::Tensor&, int64_t) override {
    cache_.rollback_to(0);
    if (budget_) budget_->begin();
    // Prefill now, so that every propose() costs one forward of about the same size. A prompt that leaves the
    // draft no room is not fed: propose() then drafts nothing.
    if (static_cast<int64_t>(prompt.size()) + 1 <= cache_.context()) {
      ForwardOptions options;
      options.logits = ForwardOptions::Logits::None;
      cache_.feed(prompt, options);
    }
  }

  DraftTree propose(const DraftRequest& request) override {
    const std::vector<int64_t>& seq = request.sequence;
    const auto n = static_cast<int64_t>(seq.size());
    // k drafts feed the sequence and k - 1 masks: n + k - 1 positions of the draft's context.
    const int64_t most = budget_ ? budget_->reach() : k_;
    const int64_t k = std::min<int64_t>({most, request.max_nodes, request.tokens_wanted, cache_.context() - n + 1});
    if (n == 0 || k <= 0) return {};
    if (budget_ && !budget_->drafts_this_cycle()) return {};
    if (budget_) budget_->start(static_cast<int32_t>(k), request.batch_size, true);

    cache_.sync_with(seq);
    std::vector<int64_t> fed(seq.begin() + cache_.length(), seq.end());  // at least the root
    const auto real = static_cast<int64_t>(fed.size());
    fed.insert(fed.end(), static_cast<size_t>(k - 1), mask_token_);
    ForwardOptions options;
    options.logits = ForwardOptions::Logits::Rows;
    options.rows = at::arange(real - 1, real - 1 + k, at::kLong);  // the root's row and the mask slots'
    const at::Tensor logits = cache_.feed(fed, options).logits;    // [k, vocab]
    cache_.rollback_to(n);                                         // the mask rows go at once

    return chain_of_slots(logits, request.sampler, budget_ ? &*budget_ : nullptr);
  }

  // Nothing to undo: the cache holds only the sequence up to the root; the accepted drafts are fed next cycle.
  void observe(const VerifyResult& result) override {
    if (budget_) budget_->observe(static_cast<int64_t>(result.accepted_nodes.size()));
  }

 private:
  int64_t k_;
  int64_t mask_token_;
  DraftModelCache cache_;  // the draft's rows of the accepted sequence, up to the last root
  std::optional<ChainBudget> budget_;  // k=auto
};

}  // namespace

const StrategyDescriptor& pard_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "pard";
    d.summary = "PARD: a draft LM trained to fill k - 1 mask tokens drafts k tokens in one forward";
    d.needs = StrategyNeeds::ParallelDraftModel;
    d.shape = DraftShape::Chain;
    d.has_confidence = true;
    d.options = {path_option("draft", true, "the parallel draft (train-lm --parallel; config.json names its pard_token)"),
                 integer_option("k", 4, 1, 64,
                                "tokens drafted per cycle, in one draft forward; auto: as many as pay under the measured "
                                "verify cost and the calibrated confidences (none when none pays)")
                     .also("auto"),
                 integer_option("mask_token", -1, -1, 1 << 30,
                                "the mask id (-1: the draft's config.json pard_token)")};
    for (auto& o : chain_budget_options("k", "max_auto_k", 8)) d.options.push_back(o);
    d.check_options = [](const StrategyOptions& o) { automatic_budget("pard", o, "k"); };
    // Untrained drafts: mask slots carry nothing, so later slots are mostly rejected; slot 1 of the self draft is
    // the target's own distribution (always accepted at T = 0).
    // An unrelated random draft is almost never accepted at T 1.5: its wrong-rule control runs hot (T 8).
    d.test_variants = {with_control_temperature({"pard_other_draft", {"draft={other_model}", "k=4", "mask_token=3"}}, 8.0),
                       {"pard_self_draft", {"draft={target}", "k=3", "mask_token=3"},
                        "slot 1 of the target drafting for itself is the target's own distribution, never rejected in "
                        "the first two tokens; the mask slots' drafts are seldom the target's likely tokens, so the "
                        "per-position rank test sees no bias either (power about 0 measured); pard_other_draft is "
                        "power-tested"},
                       // k=auto on fixed costs (drafts independent of the clock), cheap enough to keep drafting.
                       with_control_temperature({"pard_auto", {"draft={other_model}", "k=auto", "max_auto_k=5",
                                                               "mask_token=3", "auto_cost=1/0.001/0.001"}},
                                                8.0)};
    d.make = [](const StrategyContext& context, const StrategyOptions& options) -> std::unique_ptr<DraftStrategy> {
      const std::string path = options.get_string("draft");
      std::shared_ptr<const LlamaModel> draft = LlamaModel::load(path, context.target.options());
      const ModelConfig& c = draft->config();
      if (c.vocab_size != context.target.config().vocab_size)
        throw Error("strategy pard: draft model " + path + " has vocab_size " + std::to_string(c.vocab_size) +
                    " but the target has vocab_size " + std::to_string(context.target.config().vocab_size) +
                    "; the draft must share the target's vocabulary");
      int64_t mask = options.get_int("mask_token");
      if (mask < 0) mask = c.pard_token;
      if (mask < 0)
        throw Error("strategy pard: draft model " + path + " has no pard_token in its config.json (not a parallel "
                    "draft: train one with `draftlab train-lm --init " + path + " --parallel K`), or give mask_token=ID");
      if (mask >= c.vocab_size)
        throw Error("strategy pard: option mask_token: expected an id in [0, " + std::to_string(c.vocab_size) +
                    "), got " + std::to_string(mask));
      auto budget = chain_budget_from(context.target, "pard", options, "k", "max_auto_k");
      const int64_t k = budget ? budget->max_depth() : options.get_int("k");
      return std::make_unique<ParallelDraftStrategy>(std::move(draft), k, mask, std::move(budget));
    };
    return d;
  }();
  return d;
}

const DraftFamily& pard_family() {
  static const DraftFamily f{"pard", {&pard_strategy()}};
  return f;
}

}  // namespace draftlab
