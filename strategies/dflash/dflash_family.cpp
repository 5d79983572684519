// The dflash family: DFlash's block drafter (dflash_head.h), its trainer (dflash_training.h) and the strategy
// dflash: one draft forward gives B - 1 per-slot distributions after the root; drafted as a chain (each slot's
// argmax, or at T > 0 a sample from its own q), or with ddtree_nodes > 0 as DDTree's tree (arXiv 2604.12989): a
// best-first heap over the slots' marginals adds the most probable paths (the product of their tokens' slot
// probabilities) up to the node budget. DDTree's nodes are deterministic top choices, point masses to the verifier
// at every temperature; the chain's sampled slots carry their q. Either way the output is the target's.
//
// k=auto (strategies/chain_budget.h): the chain keeps slots while one more may pay under this machine's verify cost,
// cut at T = 0 to its best prefix; no draft when no chain pays. ddtree_nodes=auto (strategies/eagle_tree/auto_budget.h,
// eagle2's total_tokens=auto): DDTree's tree of up to max_auto_nodes, cut to the value-ordered prefix that maximises
// expected tokens per second under the calibrated slot probabilities; no draft when no tree pays. Its nodes are point
// masses chosen from the slots' distributions, not drawn, so the cut keeps the output the target's at every
// temperature. The forward always runs the whole block (below), so only the verification is chosen. The verified
// rows' features wait until the next drafting cycle extends the context with all of them in one call: a cycle that
// does not draft costs no draft work.
#include <algorithm>
#include <chrono>
#include <numeric>
#include <queue>

#include "core/base/error.h"
#include "strategies/chain_budget.h"
#include "strategies/dflash/dflash_gguf.h"
#include "strategies/dflash/dflash_head.h"
#include "strategies/dflash/dflash_training.h"
#include "strategies/eagle_tree/auto_budget.h"
#include "strategies/registry.h"

namespace draftlab {

namespace {

class DFlashStrategy : public SequenceStrategy {
 public:
  // The automatic budgets: k=auto's chain, or ddtree_nodes=auto's tree (with auto_cost's fixed costs, if given).
  struct Budgets {
    std::optional<ChainBudget> chain;
    bool tree = false;
    std::optional<FixedCosts> tree_costs;
  };
  // slots: how many of the block's B - 1 a draft may use (k=auto: the chain budget's max_depth()); tree_nodes: DDTree's
  // node budget (ddtree_nodes=auto: the most nodes it considers).
  DFlashStrategy(std::shared_ptr<const DFlashHead> head, int64_t block, int64_t slots, int64_t tree_nodes,
                 Budgets budgets)
      : head_(std::move(head)),
        block_(block),
        slots_(slots),
        tree_nodes_(tree_nodes),
        capacity_(head_->target().config().max_position_embeddings),
        budget_(std::move(budgets.chain)),
        tree_costs_(std::move(budgets.tree_costs)) {
    if (budgets.tree) tree_budget_.emplace(tree_costs_ ? std::optional<double>(tree_costs_->draft_seconds) : std::nullopt);
  }

  std::string name() const override { return "dflash"; }
  std::vector<int64_t> target_feature_layers() const override { return head_->config().target_layer_ids; }

  void begin(const std::vector<int64_t>& prompt, const at::Tensor& features, int64_t) override {
    context_ = head_->make_context(capacity_);
    waiting_.clear();
    waiting_rows_ = 0;
    if (budget_) budget_->begin();
    if (tree_budget_) tree_budget_->begin();
    in_step_ = features.defined() && features.size(0) == static_cast<int64_t>(prompt.size()) &&
               features.size(0) <= capacity_;
    if (in_step_) head_->extend(context_, features);
  }

  DraftTree propose(const DraftRequest& request) override {
    const auto n = static_cast<int64_t>(request.sequence.size());
    // The context and the waiting rows must hold exactly the positions before the root (a sequence from elsewhere:
    // draft nothing).
    if (!in_step_ || context_.length + waiting_rows_ != n - 1) return {};
    const int64_t depth = std::min<int64_t>({slots_, request.tokens_wanted, request.max_nodes, capacity_ - n});
    if (depth < 1) return {};
    if (budget_ && !budget_->drafts_this_cycle()) return {};
    if (tree_budget_ && !tree_budget_->drafts_this_cycle()) return {};
    if (budget_) budget_->start(static_cast<int32_t>(depth), request.batch_size, true);
    // The tree budget's cost curve, measured once per model and batch size, before the draft is timed.
    const int64_t tree_nodes = std::min<int64_t>(tree_nodes_, request.max_nodes);
    const VerifyCost* tree_cost =
        !tree_budget_ ? nullptr
                      : tree_costs_ ? &tree_costs_->verify
                                    : &VerifyCost::shared(head_->target(), tree_nodes_ + 1, request.batch_size);
    const auto t0 = std::chrono::steady_clock::now();
    if (!waiting_.empty()) {
      head_->extend(context_, waiting_.size() == 1 ? waiting_[0] : at::cat(waiting_));
      waiting_.clear();
      waiting_rows_ = 0;
    }
    // The whole block whenever its positions fit, even when fewer slots are wanted: the slots attend to each other,
    // so a shorter block would change every slot's distribution from the one trained (and llama.cpp's, which runs
    // [last, mask x min(--draft-max, B - 1)] to the end).
    const int64_t block = std::min<int64_t>(block_, capacity_ - n + 1);
    const at::Tensor logits =
        head_->draft(context_, request.sequence.back(), block).to(at::kCPU).narrow(0, 0, depth);  // [depth, V]
    if (tree_nodes_ == 0) return chain_of_slots(logits, request.sampler, budget_ ? &*budget_ : nullptr);
    DraftTree tree = ddtree(logits, tree_nodes);
    if (!tree_budget_) return tree;
    // Best-first order puts every parent before its children: all nodes are candidates, the prefix chosen in value
    // order keeps its nodes' ancestors.
    std::vector<int32_t> all(static_cast<size_t>(tree.size()));
    std::iota(all.begin(), all.end(), 0);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return tree.subtree(tree_budget_->choose(tree, all, *tree_cost, seconds, request.sampler.params().greedy()));
  }

  void observe(const VerifyResult& result) override {
    if (budget_) budget_->observe(static_cast<int64_t>(result.accepted_nodes.size()));
    // No sync to time: the verified rows' features wait for the next draft, whose time holds them.
    if (tree_budget_) tree_budget_->observe(result.matched_nodes(), result.token_after_match(), 0.0);
    if (!in_step_ || !result.features.defined()) {
      in_step_ = false;
      return;
    }
    if (context_.length + waiting_rows_ + result.features.size(0) > capacity_) {
      in_step_ = false;  // past the context: nothing more to draft
      return;
    }
    waiting_.push_back(result.features.clone());  // the verifier's tensor is not ours to keep
    waiting_rows_ += result.features.size(0);
  }

 private:
  // DDTree: slot probabilities are the same whatever the path above (the slots are drafted together), so the best
  // paths form a lattice: a popped node offers its next sibling (the next rank at its slot, under its parent) and its
  // first child (rank 0 at the next slot).
  static DraftTree ddtree(const at::Tensor& logits, int64_t budget) {
    const int64_t depth = logits.size(0);
    const int64_t k = std::min<int64_t>(budget, logits.size(1));
    const auto [probs, tokens] = at::softmax(logits, -1).topk(k, -1);
    const auto p = probs.contiguous();
    const auto t = tokens.contiguous();
    const float* pv = p.data_ptr<float>();
    const int64_t* tv = t.data_ptr<int64_t>();
    struct Candidate {
      double value, parent_value;
      int32_t parent;
      int64_t slot, rank;
      bool operator<(const Candidate& o) const { return value < o.value; }
    };
    std::priority_queue<Candidate> heap;
    heap.push({pv[0], 1.0, -1, 0, 0});
    DraftTree tree;
    while (!heap.empty() && tree.size() < budget) {
      const Candidate c = heap.top();
      heap.pop();
      const float prob = pv[c.slot * k + c.rank];
      const int32_t node = tree.add(tv[c.slot * k + c.rank], c.parent, prob);
      if (c.rank + 1 < k) heap.push({c.parent_value * pv[c.slot * k + c.rank + 1], c.parent_value, c.parent, c.slot, c.rank + 1});
      if (c.slot + 1 < depth) heap.push({c.value * pv[(c.slot + 1) * k], c.value, node, c.slot + 1, 0});
    }
    return tree;
  }

  std::shared_ptr<const DFlashHead> head_;
  int64_t block_, slots_, tree_nodes_, capacity_;
  DFlashHead::Context context_;
  bool in_step_ = false;  // the context and waiting_ mirror the sequence up to the root
  std::vector<at::Tensor> waiting_;  // verified rows' features not yet in the context (the next draft adds them)
  int64_t waiting_rows_ = 0;
  std::optional<ChainBudget> budget_;  // k=auto
  std::optional<FixedCosts> tree_costs_;  // ddtree_nodes=auto with auto_cost
  std::optional<AutoBudget> tree_budget_;  // ddtree_nodes=auto
};

// Which budget is automatic: k=auto (a chain), ddtree_nodes=auto (a tree) or none (""); k=auto with a fixed tree is an
// Error too.
std::string automatic_budget_of(const StrategyOptions& o) {
  const std::string automatic = automatic_budget("dflash", o, std::vector<std::string>{"k", "ddtree_nodes"});
  if (automatic == "k" && o.get_int("ddtree_nodes") > 0)
    throw Error("strategy dflash: option k=auto chooses a chain's length; it cannot be given with ddtree_nodes=" +
                o.get_string("ddtree_nodes") + " (a tree: ddtree_nodes=auto chooses the tree)");
  return automatic;
}

std::shared_ptr<const DFlashHead> head_from(const StrategyContext& context, const StrategyOptions& o) {
  const std::string path = o.get_string("head");
  if (!path.empty()) return DFlashHead::load(path, context.target);
  return DFlashHead::random(context.target, static_cast<uint64_t>(o.get_int("head_seed")), 1,
                            std::max<int64_t>(2, o.get_int("block_size")));
}

HeadTrainingResult train(const HeadTrainingRun& run) {
  DFlashTrainingOptions o;
  static_cast<HeadTrainingOptions&>(o) = run.common;
  o.layers = run.options.get_int("draft-layers");
  o.block_size = run.options.get_int("block-size");
  o.anchors = run.options.get_int("anchors");
  o.gamma = run.options.get_double("gamma");
  o.mask_token = run.options.get_int("mask-token");
  return train_dflash_head(run.target, o, run.data);
}

}  // namespace

const StrategyDescriptor& dflash_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "dflash";
    d.summary = "DFlash: a block drafter on injected target features drafts block_size - 1 tokens in one forward; "
                "ddtree_nodes > 0: DDTree's tree over the slots' marginals";
    d.needs = StrategyNeeds::Head;
    d.head_family = "dflash";
    d.shape = DraftShape::DynamicTree;
    d.has_confidence = true;
    d.options = {path_option("head", false, "a trained DFlash draft of the target (a folder); absent: random (tests)"),
                 integer_option("head_seed", 0, 0, 1000000, "the random draft's seed"),
                 integer_option("block_size", 0, 0, 64, "B: B - 1 drafted slots (0: the draft's own block size)"),
                 integer_option("ddtree_nodes", 0, 0, 1024,
                                "DDTree's node budget (0: a chain of the slots' tops); auto: the part of a tree of "
                                "max_auto_nodes that pays most under the measured verify cost and the calibrated slot "
                                "probabilities (none when none pays)")
                     .also("auto"),
                 integer_option("max_auto_nodes", 16, 1, 1024, "ddtree_nodes=auto: the most nodes a tree has"),
                 integer_option("k", 0, 0, 63,
                                "slots a draft uses, the chain's length or DDTree's depth (0: all B - 1); auto: a chain "
                                "of as many as pay under the measured verify cost and the calibrated confidences (none "
                                "when none pays)")
                     .also("auto"),
                 auto_cost_option("k=auto or ddtree_nodes", "token (k=auto) or cycle (ddtree_nodes=auto)")};
    d.check_options = [](const StrategyOptions& o) { automatic_budget_of(o); };
    // A random draft's slots are seldom accepted at T 1.5: the wrong-rule controls run hot (T 8).
    d.test_variants = {with_control_temperature({"dflash", {"block_size=4"}}, 8.0),
                       with_control_temperature({"dflash_ddtree", {"block_size=4", "ddtree_nodes=6", "head_seed=3"}}, 8.0),
                       // k=auto on fixed costs (drafts independent of the clock), cheap enough to keep drafting.
                       with_control_temperature({"dflash_auto", {"block_size=5", "k=auto", "auto_cost=1/0.001/0.001"}},
                                                8.0),
                       with_control_temperature({"dflash_ddtree_auto", {"block_size=4", "ddtree_nodes=auto",
                                                                        "max_auto_nodes=6", "head_seed=3",
                                                                        "auto_cost=1/0.001/0.001"}},
                                                8.0)};
    d.make = [](const StrategyContext& context, const StrategyOptions& options) -> std::unique_ptr<DraftStrategy> {
      auto head = head_from(context, options);
      int64_t block = options.get_int("block_size");
      if (block == 0) block = head->config().block_size;
      check(block >= 2, "strategy dflash: option block_size: expected 2..64 (or 0), got " + std::to_string(block));
      DFlashStrategy::Budgets budgets;
      int64_t slots = block - 1;
      const std::string automatic = automatic_budget_of(options);
      if (automatic == "k")
        budgets.chain.emplace(context.target, static_cast<int32_t>(slots),
                              parse_auto_cost("dflash", options.get_string("auto_cost")));
      else if (options.get_int("k") > 0) {
        check(options.get_int("k") <= slots, "strategy dflash: option k: expected at most block_size - 1 = " +
                                                 std::to_string(slots) + " slots, got " + std::to_string(options.get_int("k")));
        slots = options.get_int("k");
      }
      int64_t tree_nodes = 0;
      if (automatic == "ddtree_nodes") {
        budgets.tree = true;
        budgets.tree_costs = parse_auto_cost("dflash", options.get_string("auto_cost"));
        tree_nodes = options.get_int("max_auto_nodes");
      } else {
        tree_nodes = options.get_int("ddtree_nodes");
      }
      return std::make_unique<DFlashStrategy>(std::move(head), block, slots, tree_nodes, std::move(budgets));
    };
    return d;
  }();
  return d;
}

const HeadFamily& dflash_heads() {
  static const HeadFamily f = [] {
    HeadFamily f;
    f.name = "dflash";
    f.title = "DFlash draft";
    f.summary = "DFlash: decoder layers over the target's embedding and LM head, five target layers' features "
                "injected as keys and values, a bidirectional block of mask slots";
    f.recognises = is_dflash_config;
    f.tree_strategy = "dflash";
    f.training_options = {
        integer_option("draft-layers", 1, 1, 16, "the draft's decoder layers"),
        integer_option("block-size", 8, 2, 64, "B: the block trained (B - 1 drafted slots)"),
        integer_option("anchors", 16, 1, 4096, "blocks per window, at random anchors"),
        number_option("gamma", 4, 0.01, 1000, "slot k's loss weighs exp(-(k - 1) / gamma) (the paper's 7 for B 16)"),
        integer_option("mask-token", -1, -1, 1 << 30, "the mask id (-1: the highest id absent from the data)")};
    f.train = train;
    f.export_gguf = [](const std::string& head, const LlamaModel& target, const Tokenizer& tokenizer,
                       const std::string& out, GgmlType type, const std::string& name) {
      export_dflash_gguf(*DFlashHead::load(head, target), tokenizer, out, type, name);
    };
    return f;
  }();
  return f;
}

const DraftFamily& dflash_family() {
  static const DraftFamily f{"dflash", {&dflash_strategy()}, &dflash_heads()};
  return f;
}

}  // namespace draftlab
