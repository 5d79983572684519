#include "strategies/eagle2.h"

#include <algorithm>
#include <numeric>

#include <chrono>
#include <optional>

#include "core/base/error.h"
#include "core/decoding/verify_cost.h"
#include "strategies/eagle_drafter.h"

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
  // Value descending; on equal values the shallower node first, which puts a parent before a child of equal value
  // (confidence 1), so every kept node's parent is kept too.
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take), order.end(),
                    [&](int32_t a, int32_t b) {
                      const DraftNode& x = tree.node(a);
                      const DraftNode& y = tree.node(b);
                      if (x.value != y.value) return x.value > y.value;
                      if (x.depth != y.depth) return x.depth < y.depth;
                      return a < b;
                    });
  order.resize(take);
  std::sort(order.begin(), order.end());
  return order;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

class Eagle2Strategy : public DraftStrategy {
 public:
  Eagle2Strategy(const LlamaModel& target, std::shared_ptr<const EagleHead> head, Eagle2Options options)
      : target_(target), drafter_(std::move(head)), o_(options) {}

  std::string name() const override { return "eagle2"; }

  void begin(const std::vector<int64_t>& prompt, const at::Tensor& features, int64_t first) override {
    // total_tokens=auto: the cost curve is measured once per strategy, on the first sequence.
    if (o_.auto_budget && !cost_) cost_ = VerifyCost::measure(target_, o_.max_auto_tokens);
    drafter_.begin(prompt, features, first);
  }
  void observe(const VerifyResult& result) override {
    const auto t0 = Clock::now();
    drafter_.observe(result);
    if (o_.auto_budget && expand_seconds_ > 0.0) {  // skipped cycles say nothing about drafting
      calibration_.observe(predicted_, static_cast<double>(result.accepted_nodes.size()));
      draft_seconds_ = 0.8 * draft_seconds_ + 0.2 * (expand_seconds_ + seconds_since(t0));
    }
  }

  DraftTree propose(const DraftRequest& request) override {
    const auto t0 = Clock::now();
    drafter_.start_tree(request);
    // total_tokens=auto that last chose to verify nothing: drafting does not pay here (a weak head, or a draft as
    // costly as the target), so skip the expansion too, re-probing every kProbeEvery-th cycle.
    if (o_.auto_budget && last_budget_ == 0 && ++cycles_without_draft_ % kProbeEvery != 0) {
      predicted_ = 0.0;
      expand_seconds_ = 0.0;
      return {};
    }
    const int32_t cap = o_.auto_budget ? o_.max_auto_tokens - 1 : o_.total_tokens - 1;
    const int32_t budget = std::min(cap, request.max_nodes);  // drafted nodes (the root excluded)
    // A kept node needs all its ancestors kept, so layers deeper than the budget could never be verified.
    const int32_t depth = std::min({o_.depth, request.max_depth, budget});
    if (depth <= 0) return {};

    DraftTree tree;
    std::vector<int32_t> layer;     // the latest layer's nodes
    std::vector<int32_t> expanded;  // every node chosen for expansion (the draft without reranking)
    std::vector<int32_t> frontier{EagleDrafter::kRoot};
    for (int32_t d = 1; d <= depth; ++d) {
      // One head forward for the whole frontier (none for the root: the sync forward predicted it).
      const auto candidates = top_candidates(drafter_.expand(tree, frontier), o_.top_k);
      layer.clear();
      for (size_t f = 0; f < frontier.size(); ++f) {
        const Candidates& c = candidates[f];
        for (size_t r = 0; r < c.tokens.size(); ++r) layer.push_back(tree.add(c.tokens[r], frontier[f], c.probs[r]));
      }
      frontier = eagle2_select(tree, layer, o_.top_k, o_.rank_by_value);
      if (o_.auto_budget && prune_below_ > 0.0f) {
        // total_tokens=auto: a node valued below last cycle's cut-off would not be verified, nor would its
        // children (a child's value never exceeds its parent's): expanding it only costs drafting time.
        frontier.erase(std::remove_if(frontier.begin(), frontier.end(),
                                      [&](int32_t i) { return tree.node(i).value < prune_below_; }),
                       frontier.end());
      }
      expanded.insert(expanded.end(), frontier.begin(), frontier.end());
      if (frontier.empty()) break;
    }
    // `frontier` now holds the best of the last layer: part of the no-rerank draft, never expanded.
    std::vector<int32_t> keep = o_.rerank ? eagle2_rerank(tree, budget) : eagle2_rerank(tree, budget, expanded);
    if (o_.auto_budget) {
      expand_seconds_ = seconds_since(t0);
      keep = auto_budget(tree, keep);
    }
    return tree.subtree(keep);
  }

 private:
  // Of the reranked nodes, the best-valued prefix that maximises expected tokens per second (verify_cost.h).
  std::vector<int32_t> auto_budget(const DraftTree& tree, std::vector<int32_t> kept) {
    std::sort(kept.begin(), kept.end(), [&](int32_t a, int32_t b) {
      const DraftNode& x = tree.node(a);
      const DraftNode& y = tree.node(b);
      if (x.value != y.value) return x.value > y.value;
      if (x.depth != y.depth) return x.depth < y.depth;
      return a < b;
    });
    std::vector<float> values;
    for (int32_t i : kept) values.push_back(tree.node(i).value);
    const int32_t m = best_budget(values, calibration_.alpha(), draft_seconds_, *cost_);
    last_budget_ = m;
    // Next cycle expands only nodes near or above this cycle's cut-off; none when the budget was not binding.
    prune_below_ = (m > 0 && m < static_cast<int32_t>(values.size())) ? kPruneSlack * values[m - 1] : 0.0f;
    if (m > 0) cycles_without_draft_ = 0;
    kept.resize(m);
    predicted_ = 0.0;
    for (float v : std::vector<float>(values.begin(), values.begin() + m)) predicted_ += v;
    std::sort(kept.begin(), kept.end());
    return kept;
  }

  const LlamaModel& target_;
  EagleDrafter drafter_;
  Eagle2Options o_;
  // total_tokens=auto state.
  std::optional<VerifyCost> cost_;
  AcceptanceCalibration calibration_;
  double predicted_ = 0.0;       // sum of the values of the last tree's nodes
  double expand_seconds_ = 0.0;  // this cycle's drafting time before the budget choice
  double draft_seconds_ = 0.0;   // running estimate of drafting time per cycle (expansion + sync)
  static constexpr int kProbeEvery = 8;
  static constexpr float kPruneSlack = 0.75f;  // margin for the next context being easier than this one
  float prune_below_ = 0.0f;                    // value under which a node is not expanded (auto only)
  int32_t last_budget_ = -1;
  int cycles_without_draft_ = 0;
};

}  // namespace

std::unique_ptr<DraftStrategy> make_eagle2_strategy(const StrategyContext& context, const StrategyOptions& options) {
  Eagle2Options o;
  auto int_option = [&](const char* key, int64_t fallback, int64_t lo) {
    const int64_t v = options.get_int(key, fallback);
    check(v >= lo && v <= 100000, std::string("option ") + key + ": expected an integer in [" + std::to_string(lo) +
                                      ", 100000], got " + std::to_string(v));
    return static_cast<int32_t>(v);
  };
  if (options.get_string("total_tokens", "") == "auto") {
    o.auto_budget = true;
    o.max_auto_tokens = int_option("max_auto_tokens", o.max_auto_tokens, 2);
  } else {
    o.total_tokens = int_option("total_tokens", o.total_tokens, 1);
  }
  o.depth = int_option("depth", o.depth, 1);
  o.top_k = int_option("top_k", o.top_k, 1);
  const std::string rank_by = options.get_string("rank_by", "value");
  check(rank_by == "value" || rank_by == "confidence",
        "option rank_by: expected value or confidence, got '" + rank_by + "'");
  o.rank_by_value = rank_by == "value";
  o.rerank = options.get_bool("rerank", true);
  return std::make_unique<Eagle2Strategy>(context.target, eagle_head_from_options(context, options), o);
}

}  // namespace draftlab
