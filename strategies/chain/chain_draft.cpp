// chain: classic speculative sampling with a small draft model (Leviathan et al. 2023; Chen et al. 2023).
//
// Each cycle the draft model runs gamma forwards from the root, one token each, giving a chain
// root -> d1 -> ... -> d_gamma. At T = 0 the draft takes its argmax; at T > 0 it samples d_i from its own
// processed distribution q (the decoding's temperature/top-k/top-p applied to draft logits) and records q, so
// the verifier can accept d_i with probability min(1, p/q) and keep the output distributed exactly as the target.
//
// The draft model has its own KV cache that mirrors the accepted sequence:
//   after begin():    the prompt (the first root is fed by the first propose)
//   after propose():  the whole sequence (root included) + d1 .. d_{k-1}   (the last draft is never fed)
//   after observe():  rolled back to the sequence before the root + the root + the accepted drafts it has fed
// so a propose() only feeds the new root, plus d_k when the whole chain was accepted, in one chain forward.
//
// gamma=auto (strategies/chain_budget.h): after each drafted token, whether one more could still raise tokens per
// second under this machine's verify cost curve and the draft's own time per token; at T = 0 the chain is then cut to
// its best prefix; and when no chain pays, cycles draft nothing (the cache catches up in the next drafting cycle's
// one chain forward), but for probes.
#include "strategies/chain/chain_draft.h"
#include "strategies/registry.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/base/error.h"
#include "core/decoding/draft_model_cache.h"
#include "core/decoding/drafted_token.h"
#include "strategies/chain_budget.h"

namespace draftlab {

namespace {

class ChainDraftStrategy : public SequenceStrategy {
 public:
  // budget: gamma=auto (gamma is then its max_depth()).
  ChainDraftStrategy(std::shared_ptr<const LlamaModel> draft, int64_t gamma, std::optional<ChainBudget> budget)
      : gamma_(gamma), cache_(std::move(draft)), budget_(std::move(budget)) {}

  std::string name() const override { return "chain"; }

  void begin(const std::vector<int64_t>& prompt, const at::Tensor&, int64_t) override {
    cache_.rollback_to(0);
    last_root_ = -1;
    if (budget_) budget_->begin();
    // Prefill now, so that every propose() costs the same gamma forwards. A prompt that leaves the draft no room
    // for the root is not fed: propose() then drafts nothing (the sequence only grows).
    if (static_cast<int64_t>(prompt.size()) + 1 <= cache_.context()) feed(prompt, ForwardOptions::Logits::None);
  }

  DraftTree propose(const DraftRequest& request) override {
    const std::vector<int64_t>& seq = request.sequence;
    const auto n = static_cast<int64_t>(seq.size());
    last_root_ = -1;
    // Drafting k tokens feeds the sequence and d1 .. d_{k-1}: n + k - 1 positions of the draft's context.
    const int64_t k = std::min<int64_t>({gamma_, request.max_nodes, request.tokens_wanted, cache_.context() - n + 1});
    if (n == 0 || k <= 0) return {};
    if (budget_ && !budget_->drafts_this_cycle()) return {};

    cache_.sync_with(seq);
    std::vector<int64_t> pending(seq.begin() + cache_.length(), seq.end());  // at least the root
    DraftTree tree;
    int32_t parent = -1;
    if (budget_) budget_->start(static_cast<int32_t>(k), request.batch_size);
    for (int64_t i = 0; i < k; ++i) {
      const at::Tensor logits = feed(pending, ForwardOptions::Logits::Last);  // [1, vocab]
      parent = add_drafted_token(tree, logits[0], parent, request.sampler);
      pending = {tree.node(parent).token};
      if (budget_ && !budget_->another(tree.node(parent))) break;
    }
    last_root_ = n - 1;
    if (budget_) budget_->finish(tree, request.sampler.params().greedy());
    return tree;
  }

  void observe(const VerifyResult& result) override {
    if (last_root_ < 0) return;  // nothing was drafted, nothing to undo
    if (budget_) budget_->observe(static_cast<int64_t>(result.accepted_nodes.size()));
    // Keep the rows of everything before the root, the root, and the accepted drafts (a prefix of the chain);
    // the rejected drafts' rows go. A fully accepted chain keeps all rows: its last draft was never fed.
    const int64_t committed = last_root_ + 1 + static_cast<int64_t>(result.accepted_nodes.size());
    cache_.rollback_to(std::min(committed, cache_.length()));
    last_root_ = -1;
  }

 private:
  // Runs tokens through the draft, appending to its cache; returns the requested logits.
  at::Tensor feed(const std::vector<int64_t>& tokens, ForwardOptions::Logits which) {
    ForwardOptions options;
    options.logits = which;
    return cache_.feed(tokens, options).logits;
  }

  int64_t gamma_;
  DraftModelCache cache_;         // the draft's rows of the sequence (and of fed drafts until observe())
  int64_t last_root_ = -1;        // index of the root of the last proposal, -1 when none is pending
  std::optional<ChainBudget> budget_;
};

void check_gamma(int64_t gamma) {
  if (gamma < 1) throw Error("strategy chain: option gamma: expected >= 1, got " + std::to_string(gamma));
}

std::unique_ptr<DraftStrategy> make_checked(const LlamaModel& target, std::shared_ptr<const LlamaModel> draft,
                                            int64_t gamma, const std::string& source,
                                            std::optional<ChainBudget> budget = std::nullopt) {
  check_gamma(gamma);
  check(draft != nullptr, "strategy chain: no draft model");
  const int64_t draft_vocab = draft->config().vocab_size, target_vocab = target.config().vocab_size;
  if (draft_vocab != target_vocab)
    throw Error("strategy chain: draft model " + source + " has vocab_size " + std::to_string(draft_vocab) +
                " but the target has vocab_size " + std::to_string(target_vocab) +
                "; the draft must share the target's vocabulary");
  return std::make_unique<ChainDraftStrategy>(std::move(draft), gamma, std::move(budget));
}

}  // namespace

const StrategyDescriptor& chain_draft_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "chain";
    d.summary = "classic speculative sampling with a small draft model sharing the target's vocabulary";
    d.needs = StrategyNeeds::DraftModel;
    d.shape = DraftShape::Chain;
    d.has_confidence = true;
    d.options = {path_option("draft", true, "the draft model (a Hugging Face folder or a llama2.c .bin)"),
                 integer_option("gamma", 4, 1, 1024,
                                "tokens drafted per cycle; auto: chosen token by token from the measured verify cost, "
                                "the draft's time per token and the calibrated confidences (none when none pays)")
                     .also("auto")};
    for (auto& o : chain_budget_options("gamma", "max_auto_gamma")) d.options.push_back(o);
    // An unrelated draft (mostly rejected) and the target as its own draft (always accepted at T = 0).
    // An unrelated random draft is almost never accepted at T 1.5: its wrong-rule control runs hot (T 8).
    d.test_variants = {with_control_temperature({"chain_other_draft", {"draft={other_model}", "gamma=4"}}, 8.0),
                       never_rejected({"chain_self_draft", {"draft={target}", "gamma=6"}},
                                      "the target drafting for itself has q = p"),
                       // gamma=auto on fixed costs cheap enough that even T 8's flat drafts pay (power), with values
                       // decaying along a chain for the stopping rule to end some chains early.
                       with_control_temperature({"chain_auto", {"draft={other_model}", "gamma=auto", "max_auto_gamma=8",
                                                                "auto_cost=1/0.001/0.001"}},
                                                8.0)};
    d.check_options = [](const StrategyOptions& o) { automatic_budget("chain", o, "gamma"); };
    d.make = [](const StrategyContext& context, const StrategyOptions& options) {
      const std::string path = options.get_string("draft");
      std::shared_ptr<const LlamaModel> draft = LlamaModel::load(path, context.target.options());
      auto budget = chain_budget_from(context.target, "chain", options, "gamma", "max_auto_gamma");
      const int64_t gamma = budget ? budget->max_depth() : options.get_int("gamma");
      return make_checked(context.target, std::move(draft), gamma, path, std::move(budget));
    };
    return d;
  }();
  return d;
}

std::unique_ptr<DraftStrategy> make_chain_strategy_with_draft(const LlamaModel& target,
                                                              std::shared_ptr<const LlamaModel> draft,
                                                              int64_t gamma) {
  return make_checked(target, std::move(draft), gamma, "(given)");
}

const DraftFamily& chain_family() {
  static const DraftFamily f{"chain", {&chain_draft_strategy()}};
  return f;
}

}  // namespace draftlab
