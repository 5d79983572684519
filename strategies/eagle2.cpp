#include "strategies/eagle2.h"

#include <algorithm>
#include <numeric>

#include <chrono>
#include <cstdio>
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
  Eagle2Strategy(std::string name, const LlamaModel& target, std::shared_ptr<const FeatureHead> head,
                 Eagle2Options options)
      : name_(std::move(name)), target_(target), drafter_(std::move(head)), o_(options) {}

  std::string name() const override { return name_; }
  std::vector<int64_t> target_feature_layers() const override { return drafter_.head().target_feature_layers(); }

  void begin(const std::vector<int64_t>& prompt, const at::Tensor& features, int64_t first) override {
    drafter_.begin(prompt, features, first);
    not_drafting_ = false;
  }
  void observe(const VerifyResult& result) override { observe_batch({this}, {&result}); }

  DraftTree propose(const DraftRequest& request) override { return propose_batch({this}, {request})[0]; }

  // Every sequence's tree grows layer by layer in step with the others: one head forward per layer for all of
  // them (EagleDrafter::expand_batch). Alone, this is EAGLE-2's drafting as the comments below describe it.
  std::vector<DraftTree> propose_batch(const std::vector<DraftStrategy*>& peers,
                                       const std::vector<DraftRequest>& requests) override {
    const auto strategies = peers_of_type<Eagle2Strategy>(peers);
    if (strategies.empty()) return DraftStrategy::propose_batch(peers, requests);
    const auto t0 = Clock::now();
    const size_t B = strategies.size();
    std::vector<Growth> growths(B);
    int32_t layers = 0;
    for (size_t i = 0; i < B; ++i) {
      Eagle2Strategy& s = *strategies[i];
      Growth& g = growths[i];
      // total_tokens=auto that last chose to verify nothing: drafting does not pay here (a weak head, or a draft as
      // costly as the target), so skip the expansion too, and keep the head's sync for when drafting resumes.
      // A probe (a full expansion) every probe_every_-th cycle, the interval doubling while probes keep choosing
      // nothing: on a target where no draft pays, probing every 8th cycle cost a third of the time.
      s.not_drafting_ = s.o_.auto_budget && s.last_budget_ == 0 && ++s.cycles_without_draft_ % s.probe_every_ != 0;
      if (s.not_drafting_) {
        s.predicted_ = 0.0;
        s.expand_seconds_ = 0.0;
        continue;
      }
      s.drafter_.start_tree(requests[i]);
      g.sampled = s.o_.sample_tree && !requests[i].sampler.params().greedy();
      const int32_t cap = s.o_.auto_budget ? s.o_.max_auto_tokens - 1 : s.o_.total_tokens - 1;
      g.budget = std::min(cap, requests[i].max_nodes);  // drafted nodes (the root excluded)
      // A kept node needs all its ancestors kept, so layers deeper than the budget could never be verified.
      g.depth = std::min({s.o_.depth, requests[i].tokens_wanted, g.budget});
      layers = std::max(layers, g.depth);
    }
    for (int32_t d = 1; d <= layers; ++d) {
      std::vector<size_t> growing;
      std::vector<EagleDrafter*> drafters;
      std::vector<const DraftTree*> trees;
      std::vector<std::vector<int32_t>> frontiers;
      for (size_t i = 0; i < B; ++i) {
        if (d > growths[i].depth || growths[i].frontier.empty()) continue;
        growing.push_back(i);
        drafters.push_back(&strategies[i]->drafter_);
        trees.push_back(&growths[i].tree);
        frontiers.push_back(growths[i].frontier);
      }
      if (growing.empty()) break;
      // One head forward for every frontier (none for a root: the sync forward predicted it).
      const auto logits = EagleDrafter::expand_batch(drafters, trees, frontiers);
      for (size_t k = 0; k < growing.size(); ++k) {
        Growth& g = growths[growing[k]];
        if (g.sampled)
          strategies[growing[k]]->grow_sampled(g, logits[k], requests[growing[k]].sampler);
        else
          strategies[growing[k]]->grow(g, logits[k]);
      }
    }
    // Each sequence's share of the batch's drafting time (all of it alone).
    const double drafting = seconds_since(t0) / static_cast<double>(B);
    std::vector<DraftTree> out(B);
    for (size_t i = 0; i < B; ++i) {
      Eagle2Strategy& s = *strategies[i];
      Growth& g = growths[i];
      if (g.depth <= 0) continue;
      if (g.sampled) {  // no reranking: every sampled node was chosen before it was drawn (grow_sampled)
        out[i] = std::move(g.tree);
        continue;
      }
      // `frontier` now holds the best of the last layer: part of the no-rerank draft, never expanded.
      std::vector<int32_t> keep = s.o_.rerank ? eagle2_rerank(g.tree, g.budget)
                                              : eagle2_rerank(g.tree, g.budget, g.expanded);
      if (s.o_.auto_budget) {
        s.expand_seconds_ = drafting;
        // The cost curve of this batch size, measured once per model and batch size: in a batch every sequence's
        // rows share the forward, so each sequence's budget shrinks as the batch grows.
        keep = s.auto_budget(g.tree, keep,
                             s.o_.fixed_cost ? *s.o_.fixed_cost
                                             : VerifyCost::shared(s.target_, s.o_.max_auto_tokens, requests[i].batch_size));
      }
      out[i] = g.tree.subtree(keep);
    }
    return out;
  }

  void observe_batch(const std::vector<DraftStrategy*>& peers, const std::vector<const VerifyResult*>& results) override {
    const auto strategies = peers_of_type<Eagle2Strategy>(peers);
    if (strategies.empty()) return DraftStrategy::observe_batch(peers, results);
    const auto t0 = Clock::now();
    std::vector<EagleDrafter*> drafters;
    std::vector<const VerifyResult*> drafted;
    for (size_t i = 0; i < strategies.size(); ++i) {
      if (strategies[i]->not_drafting_) {
        strategies[i]->drafter_.observe_later(*results[i]);
      } else {
        drafters.push_back(&strategies[i]->drafter_);
        drafted.push_back(results[i]);
      }
    }
    if (!drafters.empty()) EagleDrafter::observe_batch(drafters, drafted);
    const double sync = seconds_since(t0) / static_cast<double>(strategies.size());
    for (size_t i = 0; i < strategies.size(); ++i) {
      Eagle2Strategy& s = *strategies[i];
      if (s.o_.auto_budget && s.expand_seconds_ > 0.0) {  // skipped cycles say nothing about drafting
        s.calibration_.observe(s.predicted_, static_cast<double>(results[i]->accepted_nodes.size()));
        s.draft_seconds_ = 0.8 * s.draft_seconds_ + 0.2 * (s.expand_seconds_ + sync);
      }
    }
  }

 private:
  // One sequence's tree while it grows.
  struct Growth {
    DraftTree tree;
    std::vector<int32_t> layer;     // the latest layer's nodes
    std::vector<int32_t> expanded;  // every node chosen for expansion (the draft without reranking)
    std::vector<int32_t> frontier{EagleDrafter::kRoot};
    int32_t budget = 0, depth = 0;  // depth 0: no draft this cycle
    bool sampled = false;           // sample_tree at T > 0
  };

  // One layer: the frontier's top_k children each, then the next frontier (the layer's best top_k by value).
  void grow(Growth& g, const at::Tensor& logits) const {
    const auto candidates = top_candidates(logits, o_.top_k);
    g.layer.clear();
    for (size_t f = 0; f < g.frontier.size(); ++f) {
      const Candidates& c = candidates[f];
      for (size_t r = 0; r < c.tokens.size(); ++r) g.layer.push_back(g.tree.add(c.tokens[r], g.frontier[f], c.probs[r]));
    }
    g.frontier = eagle2_select(g.tree, g.layer, o_.top_k, o_.rank_by_value);
    if (o_.auto_budget && prune_below_ > 0.0f) {
      // total_tokens=auto: a node valued below last cycle's cut-off would not be verified, nor would its
      // children (a child's value never exceeds its parent's): expanding it only costs drafting time.
      g.frontier.erase(std::remove_if(g.frontier.begin(), g.frontier.end(),
                                      [&](int32_t i) { return g.tree.node(i).value < prune_below_; }),
                       g.frontier.end());
    }
    g.expanded.insert(g.expanded.end(), g.frontier.begin(), g.frontier.end());
  }

  // sample_tree at T > 0: one layer of children drawn without replacement from each frontier node's processed
  // head distribution q. Reranking a drawn node by its own value would keep it depending on the token drawn, so it
  // would no longer follow the q the verifier divides by (the output would be biased). Instead each layer is chosen
  // BEFORE it is drawn: of the slots (frontier node f, rank r < top_k), the top_k by prior value(f) * q_f(r) (the
  // r-th largest probability of q_f; confidence alone with rank_by=confidence) within the budget; f then gets that
  // many draws, and every drawn node is expanded next layer. Lossless, and the tree still follows the context.
  void grow_sampled(Growth& g, const at::Tensor& logits, Sampler& sampler) const {
    struct Slot {
      float prior;
      size_t f;
      int64_t r;
    };
    const size_t F = g.frontier.size();
    std::vector<at::Tensor> q(F);
    std::vector<Slot> slots;
    for (size_t f = 0; f < F; ++f) {
      q[f] = sampler.distribution(logits[static_cast<int64_t>(f)]);
      const float parent = g.frontier[f] == EagleDrafter::kRoot ? 1.0f : g.tree.node(g.frontier[f]).value;
      const at::Tensor top = std::get<0>(q[f].topk(std::min<int64_t>(o_.top_k, q[f].numel())));
      for (int64_t r = 0; r < top.numel(); ++r) {
        const float qr = top.data_ptr<float>()[r];
        if (qr > 0.0f) slots.push_back({(o_.rank_by_value ? parent : 1.0f) * qr, f, r});
      }
    }
    const auto take = static_cast<size_t>(
        std::clamp<int64_t>(std::min(o_.top_k, g.budget - g.tree.size()), 0, static_cast<int64_t>(slots.size())));
    std::partial_sort(slots.begin(), slots.begin() + static_cast<std::ptrdiff_t>(take), slots.end(),
                      [](const Slot& a, const Slot& b) {
                        if (a.prior != b.prior) return a.prior > b.prior;
                        return a.f != b.f ? a.f < b.f : a.r < b.r;
                      });
    std::vector<int64_t> draws(F, 0);
    for (size_t s = 0; s < take; ++s) ++draws[slots[s].f];
    g.layer.clear();
    for (size_t f = 0; f < F; ++f) {
      if (draws[f] == 0) continue;
      const int32_t qi = g.tree.add_distribution(q[f]);
      for (int64_t token : sampler.sample_without_replacement(q[f], draws[f]))
        g.layer.push_back(g.tree.add(token, g.frontier[f], q[f].data_ptr<float>()[token], qi, /*without_replacement=*/true));
    }
    g.frontier = g.layer;
  }

  // Of the reranked nodes, the best-valued prefix that maximises expected tokens per second (verify_cost.h).
  std::vector<int32_t> auto_budget(const DraftTree& tree, std::vector<int32_t> kept, const VerifyCost& cost) {
    std::sort(kept.begin(), kept.end(), [&](int32_t a, int32_t b) {
      const DraftNode& x = tree.node(a);
      const DraftNode& y = tree.node(b);
      if (x.value != y.value) return x.value > y.value;
      if (x.depth != y.depth) return x.depth < y.depth;
      return a < b;
    });
    std::vector<float> values;
    for (int32_t i : kept) values.push_back(tree.node(i).value);
    const int32_t m =
        best_budget(values, calibration_.alpha(), o_.fixed_cost ? o_.fixed_draft_seconds : draft_seconds_, cost);
    if (last_budget_ == 0) probe_every_ = m == 0 ? std::min(2 * probe_every_, kMaxProbeEvery) : kProbeEvery;
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

  std::string name_;
  const LlamaModel& target_;
  EagleDrafter drafter_;
  Eagle2Options o_;
  // total_tokens=auto state.
  AcceptanceCalibration calibration_;
  double predicted_ = 0.0;       // sum of the values of the last tree's nodes
  double expand_seconds_ = 0.0;  // this cycle's drafting time before the budget choice
  double draft_seconds_ = 0.0;   // running estimate of drafting time per cycle (expansion + sync)
  static constexpr int kProbeEvery = 8, kMaxProbeEvery = 256;
  int probe_every_ = kProbeEvery;
  static constexpr float kPruneSlack = 0.75f;  // margin for the next context being easier than this one
  float prune_below_ = 0.0f;                    // value under which a node is not expanded (auto only)
  int32_t last_budget_ = -1;
  int cycles_without_draft_ = 0;
  bool not_drafting_ = false;  // this cycle skipped drafting: its observation waits in the drafter
};

}  // namespace

StrategyDescriptor eagle2_descriptor_for(const std::string& name, const std::string& family) {
  StrategyDescriptor d;
  d.name = name;
  d.summary = "EAGLE-2: a dynamic draft tree grown by value (path confidence) and reranked, per cycle";
  d.needs = StrategyNeeds::Head;
  d.head_family = family;
  d.shape = DraftShape::DynamicTree;
  d.has_confidence = true;
  d.options = {integer_option("total_tokens", 60, 1, 100000,
                              "tokens verified per cycle, root included; auto: chosen per cycle from the measured "
                              "verify cost and the observed acceptance")
                   .also("auto"),
               integer_option("max_auto_tokens", 128, 2, 100000, "total_tokens=auto: the most it picks"),
               text_option("auto_cost", "measured",
                           "total_tokens=auto: measured, or F/P/D in ms: verifying n tokens costs F + P n, drafting D "
                           "per cycle (fixed: trees independent of the machine's speed)"),
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
      // A fixed cost curve (verifying is cheap beside drafting's 0.1 ms): the budget follows the values, not the clock.
      {"eagle2_auto", {"total_tokens=auto", "max_auto_tokens=32", "auto_cost=1/0.002/0.1"}},
      {"eagle2_auto_measured", {"total_tokens=auto", "max_auto_tokens=32"},
       "total_tokens=auto decides from measured wall-clock costs whether drafting pays: on a fast or loaded machine it "
       "drafts only now and then (174 real rejections in 3000 runs seen), too rarely for the control to be reliable",
       "measured costs may show that no tree pays for its verification (a random head's values are tiny)",
       /*timing_dependent=*/true},
      {"eagle2_sampled", {"sample_tree=true", "total_tokens=12", "depth=4", "top_k=3"}},
      // The head's input variants (EAGLE Figure 8) and a reduced draft vocabulary, on random heads.
      {"eagle2_feature_only", {"total_tokens=16", "depth=4", "top_k=4", "head_input=feature_only"}},
      {"eagle2_token_only", {"total_tokens=16", "depth=4", "top_k=4", "head_input=token_only"}},
      {"eagle2_draft_vocab", {"total_tokens=16", "depth=4", "top_k=4", "draft_vocab=6"}}};
  d.make = [name, family](const StrategyContext& context,
                          const StrategyOptions& options) -> std::unique_ptr<DraftStrategy> {
    Eagle2Options o;
    if (options.get_string("total_tokens") == "auto") {
      o.auto_budget = true;
      o.max_auto_tokens = static_cast<int32_t>(options.get_int("max_auto_tokens"));
      const std::string cost = options.get_string("auto_cost");
      if (cost != "measured") {
        double f = 0, per = 0, draft = 0;
        char s1 = 0, s2 = 0, rest = 0;
        if (std::sscanf(cost.c_str(), "%lf%c%lf%c%lf%c", &f, &s1, &per, &s2, &draft, &rest) != 5 || s1 != '/' ||
            s2 != '/' || !(f >= 0 && per >= 0 && draft >= 0 && f + per > 0))
          throw Error("strategy " + name + ": auto_cost=" + cost +
                      ": expected \"measured\" or F/P/D, three non-negative milliseconds (e.g. 1/0.002/0.1)");
        o.fixed_cost = VerifyCost({{1, (f + per) * 1e-3}, {2, (f + 2 * per) * 1e-3}});  // linear, extrapolated
        o.fixed_draft_seconds = draft * 1e-3;
      }
    } else {
      if (options.given("auto_cost"))
        throw Error("strategy " + name + ": auto_cost applies to total_tokens=auto only");
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
    return std::make_unique<Eagle2Strategy>(name, context.target, eagle_head_from_options(context, options, family),
                                            o);
  };
  return d;
}

const StrategyDescriptor& eagle2_strategy() {
  static const StrategyDescriptor d = eagle2_descriptor_for("eagle2", "eagle");
  return d;
}

}  // namespace draftlab
