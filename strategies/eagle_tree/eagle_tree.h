// The EAGLE tree grower: the one loop every EAGLE strategy drafts through. Each sequence's tree grows a level at a
// time, all sequences of a batch in step: one head forward per level for all of them (EagleDrafter::expand_batch;
// alone, one forward per level). What differs between the strategies is a TreePolicy, per sequence: which nodes to
// expand next, and what to add from their logits:
//   eagle-chain   the last node, its best (T = 0) or sampled child                  (eagle_chain.cpp)
//   static-tree   the parents of the spec's next depth, their children by rank      (static_tree.cpp)
//   eagle2/3      the best top_k of the last level by value, top_k children each    (eagle2.cpp; reranked after)
// Sampled trees (T > 0) draw each parent's children without replacement from the head's processed distribution q,
// recorded so the verifier divides each by its conditional q (add_sampled_children).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "core/decoding/draft_tree.h"
#include "core/model/sampler.h"
#include "strategies/eagle_tree/eagle_drafter.h"

namespace draftlab {

class TreePolicy {
 public:
  virtual ~TreePolicy() = default;
  // The nodes to expand next (EagleDrafter::kRoot for the root), each at most once per tree; empty: the tree is
  // done. Called once per level.
  virtual std::vector<int32_t> next_frontier(const DraftTree& tree) = 0;
  // Adds the children of the frontier just returned, from the head's logits [frontier, vocab] of them.
  virtual void grow(DraftTree& tree, const at::Tensor& logits, Sampler& sampler) = 0;
};

// The order EAGLE-2 keeps nodes in (reranking, total_tokens=auto): value descending; on equal values the shallower
// node first, which puts a parent before a child of equal value (confidence 1), so every prefix is a connected tree;
// then the lower index.
struct ByValue {
  const DraftTree& tree;
  bool operator()(int32_t a, int32_t b) const {
    const DraftNode& x = tree.node(a);
    const DraftNode& y = tree.node(b);
    if (x.value != y.value) return x.value > y.value;
    if (x.depth != y.depth) return x.depth < y.depth;
    return a < b;
  }
};

// Starts the tree of every sequence that has a policy (EagleDrafter::start_tree) and grows them all, a level at a
// time, until each policy says it is done. A sequence without a policy (null) drafts nothing: an empty tree.
std::vector<DraftTree> grow_trees(const std::vector<EagleDrafter*>& drafters, const std::vector<DraftRequest>& requests,
                                  const std::vector<TreePolicy*>& policies);

// What every EAGLE strategy shares: an EagleDrafter kept in sync with the target (begin, observe; a batch's syncs in
// one head forward) and drafting through it. Subclasses grow their trees with a policy (propose_batch).
class EagleTreeStrategy : public DraftStrategy {
 public:
  explicit EagleTreeStrategy(std::shared_ptr<const FeatureHead> head) : drafter_(std::move(head)) {}

  std::vector<int64_t> target_feature_layers() const override { return drafter_.head().target_feature_layers(); }
  void begin(const std::vector<int64_t>& prompt, const at::Tensor& features, int64_t first) override {
    drafter_.begin(prompt, features, first);
  }
  // Syncs every peer's drafter with its result in one head forward, but a peer that drafted nothing this cycle
  // because its budget chose so (skipped_this_cycle) defers its sync to when it drafts again (observe_later).
  void observe_batch(const std::vector<DraftStrategy*>& peers, const std::vector<const VerifyResult*>& results) override;

 protected:
  virtual bool skipped_this_cycle() const { return false; }
  EagleDrafter drafter_;
};

// Draws `count` children of `parent` without replacement from q (a processed head distribution, float32 CPU),
// adds q to the tree and the children as its conditional draws, in draw order; returns their node indices (fewer
// than count when q has fewer tokens with mass).
std::vector<int32_t> add_sampled_children(DraftTree& tree, int32_t parent, const at::Tensor& q, int64_t count,
                                          Sampler& sampler);

}  // namespace draftlab
