#include "strategies/eagle_tree/eagle2.h"
#include "strategies/eagle/eagle_family.h"

#include <algorithm>
#include <numeric>

#include <chrono>
#include <cstdio>
#include <optional>

#include "core/base/error.h"
#include "core/decoding/verify_cost.h"
#include "strategies/auto_cost.h"
#include "strategies/eagle_tree/auto_budget.h"
#include "strategies/eagle_tree/eagle_drafter.h"
#include "strategies/eagle_tree/eagle_tree.h"

namespace draftlab {

// The bookkeeping below sorts a few hundred floats on the host: std::partial_sort, no tensor ops.

std::vector<int32_t> eagle2_select(const DraftTree& tree, const std::vector<int32_t>& candidates, int32_t k,
                                   bool by_value) {
  std::vector<int32_t> order = candidates;
  const auto take = static_cast<size_t>(std::clamp<int64_t>(k, 0, static_cast<int64_t>(order.size())));
  auto key = [&](int32_t i) { return by_value ? tree.node(i).value : tree.node(i).confidence; };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take), order.end(),
                    [&](int32_t a, int32_t b) { return key(a) != key(b) ? key(a) > key(b) : a < b; });
  order.resize(take);
  return order;
}

std::vector<int32_t> eagle2_rerank(const DraftTree& tree, int32_t count, const std::vector<int32_t>& among) {
  std::vector<int32_t> order = among;
  if (order.empty()) {
    order.resize(static_cast<size_t>(tree.size()));
    std::iota(order.begin(), order.end(), 0);
  }
  const auto take = static_cast<size_t>(std::clamp<int64_t>(count, 0, static_cast<int64_t>(order.size())));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take), order.end(), ByValue{tree});
  order.resize(take);
  std::sort(order.begin(), order.end());
  return order;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// EAGLE-2's expansion of one sequence's tree (eagle_tree.h): level 1 the root's top_k children; then the latest
// level's best top_k by value (confidence with rank_by=confidence), top_k children each, up to `depth` levels.
class Eagle2Policy : public TreePolicy {
 public:
  Eagle2Policy(const Eagle2Options& o, int32_t budget, int32_t depth, int32_t top_k, bool sampled, float prune_below)
      : o_(o), budget_(budget), depth_(depth), top_k_(top_k), sampled_(sampled), prune_below_(prune_below) {}

  std::vector<int32_t> next_frontier(const DraftTree&) override {
    if (levels_ >= depth_ || frontier_.empty()) return {};
    ++levels_;
    return frontier_;
  }
  void grow(DraftTree& tree, const at::Tensor& logits, Sampler& sampler) override {
    if (sampled_)
      grow_sampled(tree, logits, sampler);
    else
      grow_top_k(tree, logits);
  }

  // Every node chosen for expansion, the last level's best included: the draft without reranking.
  const std::vector<int32_t>& expanded() const { return expanded_; }
  int32_t budget() const { return budget_; }
  int32_t depth() const { return depth_; }
  bool sampled() const { return sampled_; }

 private:
  // One level: the frontier's top_k children each, then the next frontier (the level's best top_k by value).
  void grow_top_k(DraftTree& tree, const at::Tensor& logits) {
    const auto candidates = top_candidates(logits, top_k_);
    std::vector<int32_t> level;
    for (size_t f = 0; f < frontier_.size(); ++f) {
      const Candidates& c = candidates[f];
      for (size_t r = 0; r < c.tokens.size(); ++r) level.push_back(tree.add(c.tokens[r], frontier_[f], c.probs[r]));
    }
    frontier_ = eagle2_select(tree, level, top_k_, o_.rank_by_value);
    if (prune_below_ > 0.0f) {
      // total_tokens=auto: a node valued below last cycle's cut-off would not be verified, nor would its children
      // (a child's value never exceeds its parent's): expanding it only costs drafting time.
      frontier_.erase(std::remove_if(frontier_.begin(), frontier_.end(),
                                     [&](int32_t i) { return tree.node(i).value < prune_below_; }),
                      frontier_.end());
    }
    expanded_.insert(expanded_.end(), frontier_.begin(), frontier_.end());
  }

  // sample_tree at T > 0: one level of children drawn without replacement from each frontier node's processed head
  // distribution q. Reranking a drawn node by its own value would keep it depending on the token drawn, so it would
  // no longer follow the q the verifier divides by (the output would be biased). Instead each level is chosen BEFORE
  // it is drawn: of the slots (frontier node f, rank r < top_k), the top_k by prior value(f) * q_f(r) (the r-th
  // largest probability of q_f; confidence alone with rank_by=confidence) within the budget; f then gets that many
  // draws, and every drawn node is expanded next level. Lossless, and the tree still follows the context.
  void grow_sampled(DraftTree& tree, const at::Tensor& logits, Sampler& sampler) {
    struct Slot {
      float prior;
      size_t f;
      int64_t r;
    };
    const size_t F = frontier_.size();
    std::vector<at::Tensor> q(F);
    std::vector<Slot> slots;
    for (size_t f = 0; f < F; ++f) {
      q[f] = sampler.distribution(logits[static_cast<int64_t>(f)]);
      const float parent = frontier_[f] == EagleDrafter::kRoot ? 1.0f : tree.node(frontier_[f]).value;
      const at::Tensor top = std::get<0>(q[f].topk(std::min<int64_t>(top_k_, q[f].numel())));
      for (int64_t r = 0; r < top.numel(); ++r) {
        const float qr = top.data_ptr<float>()[r];
        if (qr > 0.0f) slots.push_back({(o_.rank_by_value ? parent : 1.0f) * qr, f, r});
      }
    }
    const auto take = static_cast<size_t>(
        std::clamp<int64_t>(std::min(top_k_, budget_ - tree.size()), 0, static_cast<int64_t>(slots.size())));
    std::partial_sort(slots.begin(), slots.begin() + static_cast<std::ptrdiff_t>(take), slots.end(),
                      [](const Slot& a, const Slot& b) {
                        if (a.prior != b.prior) return a.prior > b.prior;
                        return a.f != b.f ? a.f < b.f : a.r < b.r;
                      });
    std::vector<int64_t> draws(F, 0);
    for (size_t s = 0; s < take; ++s) ++draws[slots[s].f];
    std::vector<int32_t> level;
    for (size_t f = 0; f < F; ++f) {
      if (draws[f] == 0) continue;
      const auto drawn = add_sampled_children(tree, frontier_[f], q[f], draws[f], sampler);
      level.insert(level.end(), drawn.begin(), drawn.end());
    }
    frontier_ = level;
  }

  const Eagle2Options& o_;
  int32_t budget_, depth_;  // drafted nodes (the root excluded); levels
  int32_t top_k_;           // children per expanded node and nodes expanded per level (o_.top_k, or less under auto)
  bool sampled_;            // sample_tree at T > 0
  float prune_below_;       // total_tokens=auto: nodes valued below are not expanded (0: none)
  int32_t levels_ = 0;
  std::vector<int32_t> frontier_{EagleDrafter::kRoot};
  std::vector<int32_t> expanded_;
};

class Eagle2Strategy : public EagleTreeStrategy {
 public:
  Eagle2Strategy(std::string name, const LlamaModel& target, std::shared_ptr<const FeatureHead> head,
                 Eagle2Options options)
      : EagleTreeStrategy(std::move(head)),
        name_(std::move(name)),
        target_(target),
        o_(options),
        auto_(o_.fixed_cost ? std::optional<double>(o_.fixed_draft_seconds) : std::nullopt) {}

  std::string name() const override { return name_; }

  void begin(const std::vector<int64_t>& prompt, const at::Tensor& features, int64_t first) override {
    drafter_.begin(prompt, features, first);
    auto_.begin();
  }

  // Every sequence's tree grows level by level in step with the others (eagle_tree.h), then each is reranked (and,
  // with total_tokens=auto, cut to the budget that pays).
  std::vector<DraftTree> propose_batch(const std::vector<DraftStrategy*>& peers,
                                       const std::vector<DraftRequest>& requests) override {
    const auto strategies = peers_as<Eagle2Strategy>(peers);
    const auto t0 = Clock::now();
    const size_t B = strategies.size();
    std::vector<std::optional<Eagle2Policy>> policies(B);
    std::vector<EagleDrafter*> drafters;
    std::vector<TreePolicy*> grown;
    for (size_t i = 0; i < B; ++i) {
      Eagle2Strategy& s = *strategies[i];
      drafters.push_back(&s.drafter_);
      grown.push_back(nullptr);
      if (s.o_.auto_budget && !s.auto_.drafts_this_cycle()) continue;  // no tree pays: no draft, the sync deferred
      const int32_t cap = s.o_.auto_budget ? s.o_.max_auto_tokens - 1 : s.o_.total_tokens - 1;
      const int32_t budget = std::min(cap, requests[i].max_nodes);  // drafted nodes (the root excluded)
      // A kept node needs all its ancestors kept, so levels deeper than the budget could never be verified.
      int32_t depth = std::min({s.o_.depth, requests[i].tokens_wanted, budget});
      // total_tokens=auto: an expansion near the tree it chose last.
      const int32_t limit = s.o_.auto_budget ? s.auto_.expansion_depth() : 0;
      const int32_t width = s.o_.auto_budget ? s.auto_.expansion_width() : 0;
      if (limit > 0) depth = std::min(depth, limit);
      const bool sampled = s.o_.sample_tree && !requests[i].sampler.params().greedy();
      policies[i].emplace(s.o_, budget, depth, width > 0 ? std::min(s.o_.top_k, width) : s.o_.top_k, sampled,
                          s.o_.auto_budget ? s.auto_.prune_below() : 0.0f);
      grown.back() = &*policies[i];
    }
    std::vector<DraftTree> trees = grow_trees(drafters, requests, grown);
    // Each sequence's share of the batch's drafting time (all of it alone).
    const double drafting = seconds_since(t0) / static_cast<double>(B);
    for (size_t i = 0; i < B; ++i) {
      Eagle2Strategy& s = *strategies[i];
      // No draft, or a sampled one: no reranking, every sampled node was chosen before it was drawn.
      if (!policies[i] || policies[i]->depth() <= 0 || policies[i]->sampled()) continue;
      const int32_t budget = policies[i]->budget();
      std::vector<int32_t> keep = s.o_.rerank ? eagle2_rerank(trees[i], budget)
                                              : eagle2_rerank(trees[i], budget, policies[i]->expanded());
      // The cost curve of this batch size, measured once per model and batch size: in a batch every sequence's rows
      // share the forward, so each sequence's budget shrinks as the batch grows.
      if (s.o_.auto_budget)
        keep = s.auto_.choose(trees[i], keep,
                              s.o_.fixed_cost ? *s.o_.fixed_cost
                                              : VerifyCost::shared(s.target_, s.o_.max_auto_tokens, requests[i].batch_size),
                              drafting, requests[i].sampler.params().greedy());
      trees[i] = trees[i].subtree(keep);
    }
    return trees;
  }

  void observe_batch(const std::vector<DraftStrategy*>& peers, const std::vector<const VerifyResult*>& results) override {
    const auto strategies = peers_as<Eagle2Strategy>(peers);
    const auto t0 = Clock::now();
    EagleTreeStrategy::observe_batch(peers, results);
    const double sync = seconds_since(t0) / static_cast<double>(strategies.size());
    for (size_t i = 0; i < strategies.size(); ++i)
      if (strategies[i]->o_.auto_budget)
        // The calibration learns how much of the draft the target agreed with, also what a commit limit
        // (--oracle) dropped.
        strategies[i]->auto_.observe(results[i]->matched_nodes(), results[i]->token_after_match(), sync);
  }

 private:
  bool skipped_this_cycle() const override { return auto_.skipping(); }

  std::string name_;
  const LlamaModel& target_;
  Eagle2Options o_;
  AutoBudget auto_;  // total_tokens=auto's state across cycles
};

// The options as the strategy uses them, with the rules across them (auto_cost, sample_tree): Error naming them.
Eagle2Options parse_eagle2_options(const std::string& name, const StrategyOptions& options) {
  Eagle2Options o;
  if (automatic_budget(name, options, "total_tokens")) {
    o.auto_budget = true;
    o.max_auto_tokens = static_cast<int32_t>(options.get_int("max_auto_tokens"));
    if (auto fixed = parse_auto_cost(name, options.get_string("auto_cost"))) {
      o.fixed_cost = fixed->verify;
      o.fixed_draft_seconds = fixed->draft_seconds;
    }
  } else {
    o.total_tokens = static_cast<int32_t>(options.get_int("total_tokens"));
  }
  o.depth = static_cast<int32_t>(options.get_int("depth"));
  o.top_k = static_cast<int32_t>(options.get_int("top_k"));
  o.rank_by_value = options.get_string("rank_by") == "value";
  o.rerank = options.get_bool("rerank");
  o.sample_tree = options.get_bool("sample_tree");
  if (o.sample_tree && (o.auto_budget || !o.rerank))
    throw Error("strategy " + name + ": sample_tree=true chooses each layer before drawing it and never reranks; "
                "it does not combine with " + std::string(o.auto_budget ? "total_tokens=auto" : "rerank=false") +
                " (both cut the tree by the values of drawn nodes, which would bias the output)");
  return o;
}

}  // namespace

StrategyDescriptor eagle2_descriptor_for(const std::string& name, const HeadFamily& family) {
  StrategyDescriptor d;
  d.name = name;
  d.summary = "EAGLE-2: a dynamic draft tree grown by value (path confidence) and reranked, per cycle";
  d.needs = StrategyNeeds::Head;
  d.head_family = family.name;
  d.shape = DraftShape::DynamicTree;
  d.has_confidence = true;
  d.options = {integer_option("total_tokens", 60, 1, 100000,
                              "tokens verified per cycle, root included; auto: chosen per cycle from the measured "
                              "verify cost and the observed acceptance")
                   .also("auto"),
               integer_option("max_auto_tokens", 128, 2, 100000, "total_tokens=auto: the most it picks"),
               auto_cost_option("total_tokens", "cycle"),
               integer_option("depth", 6, 1, 100000, "layers of the tree"),
               integer_option("top_k", 10, 1, 100000, "nodes expanded per layer and children per node"),
               choice_option("rank_by", {"value", "confidence"}, "what picks the nodes to expand (confidence: "
                                                                 "ablation w/o value)"),
               bool_option("rerank", true, "false: ablation w/o reranking"),
               bool_option("sample_tree", false,
                           "T > 0: children drawn without replacement from the head's distribution, each layer "
                           "chosen by prior value before it is drawn (no reranking; not with total_tokens=auto)")};
  for (auto& o : eagle_head_options(family)) d.options.push_back(o);
  d.test_variants = {
      {"eagle2", {}},
      {"eagle2_small", {"total_tokens=12", "depth=4", "top_k=3"}},
      {"eagle2_ablations", {"rank_by=confidence", "rerank=false", "top_k=4", "depth=3"}},
      // A fixed cost curve (a verified row costs 0.002 ms, drafting nothing): the budget follows the values, not the
      // clock. Free drafting keeps it drafting: the tiny head's nodes are mostly rejected at T > 0, and with drafting at
      // 0.1 ms a cycle the calibrated classes soon said no tree pays (630 nodes drafted in 1000 runs, too few to test).
      {"eagle2_auto", {"total_tokens=auto", "max_auto_tokens=32", "auto_cost=1/0.002/0"}},
      {"eagle2_auto_measured", {"total_tokens=auto", "max_auto_tokens=32"},
       "total_tokens=auto decides from measured wall-clock costs whether drafting pays: on a fast or loaded machine it "
       "drafts only now and then (174 real rejections in 3000 runs seen), too rarely for the control to be reliable; "
       "eagle2_auto (the same budget rule on a fixed cost curve) is power-tested",
       "measured costs may show that no tree pays for its verification (a random head's values are tiny)",
       /*timing_dependent=*/true},
      {"eagle2_sampled", {"sample_tree=true", "total_tokens=12", "depth=4", "top_k=3"}},
      // The head's input variants (EAGLE Figure 8) and a reduced draft vocabulary, on random heads.
      {"eagle2_feature_only", {"total_tokens=16", "depth=4", "top_k=4", "head_input=feature_only"}},
      {"eagle2_token_only", {"total_tokens=16", "depth=4", "top_k=4", "head_input=token_only"}},
      {"eagle2_draft_vocab", {"total_tokens=16", "depth=4", "top_k=4", "draft_vocab=6"}}};
  d.check_options = [name, &family](const StrategyOptions& options) {
    check_eagle_head_options(family, options);
    parse_eagle2_options(name, options);
  };
  d.make = [name, &family](const StrategyContext& context,
                          const StrategyOptions& options) -> std::unique_ptr<DraftStrategy> {
    return std::make_unique<Eagle2Strategy>(name, context.target, eagle_head_from_options(context, options, family),
                                            parse_eagle2_options(name, options));
  };
  return d;
}

const StrategyDescriptor& eagle2_strategy() {
  static const StrategyDescriptor d = eagle2_descriptor_for("eagle2", eagle_heads());
  return d;
}

}  // namespace draftlab
