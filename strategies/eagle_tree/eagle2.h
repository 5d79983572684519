// eagle2: EAGLE-2's context-aware dynamic draft tree (EAGLE-2 paper section 4), drafted with an EAGLE head.
//
// Expansion (4.1): the root's top_k children form layer 1. Then, for each further layer, the top_k nodes of the
// latest layer by VALUE (the product of draft confidences from the root: an estimate of the chance the whole path
// is accepted) go through ONE head forward together, and each gets its top_k children, confidence-descending.
// Reranking (4.2): of all drafted nodes, keep the best by value, ties to the shallower node. A node's value never
// exceeds its parent's, so the kept set is a connected tree (DraftTree::subtree).
//
// Options (declared with their defaults, the paper's 7B settings of appendix A, in eagle2_strategy()):
//   total_tokens     tokens the target verifies per cycle INCLUDING the root, as in the official code
//                    (EaModel total_token; Model.total_tokens = total_token - 1): 60 -> at most 59 drafted nodes.
//                    Paper: 60 / 50 / 48 for 7B / 13B / 70B.
//                    total_tokens=auto: chosen every cycle from this machine's measured verification cost curve and
//                    the observed acceptance (core/decoding/verify_cost.h), up to max_auto_tokens; in a batch
//                    (DraftRequest::batch_size) from the curve of that batch size, so the budget shrinks as it grows;
//                    depth and top_k become caps: a node valued below 3/4 of last cycle's cut-off is not expanded,
//                    and the expansion is at most m + 1 levels of m + 1 children for last cycle's budget m (two for a
//                    probe), so the tree is as deep and wide as the context earns and drafting costs what the
//                    budget uses.
//   depth            layers of the tree (the paper's "depth 6"; the official code's depth=5 plus the root layer);
//                    depth - 1 head forwards per cycle, the first layer coming from the sync forward.
//   top_k            nodes expanded per layer and children per expanded node.
//   rank_by          value or confidence: what picks the nodes to expand (ablation "w/o value", Table 3). Reranking is
//                    always by value (confidence would not keep the tree connected).
//   rerank           false: ablation "w/o reranking": the draft is the nodes chosen for expansion at each layer
//                    plus the top_k of the last layer (cut to the budget by value if larger).
//   head, head_seed, head_input, draft_vocab   the EAGLE head (eagle_head_options() in eagle_drafter.h).
//   auto_cost        total_tokens=auto: "measured" (default), or F/P/D in milliseconds: verify cost F + P n for n
//                    tokens, drafting D per cycle, fixed (deterministic trees: the lossless tests use it).
//   sample_tree      T > 0: children drawn without replacement from the head's processed distribution (EAGLE-1's
//                    sampled tree) instead of the top-k; each layer is chosen by prior value before it is drawn,
//                    and nothing is reranked (see grow_sampled in eagle2.cpp for why that keeps it lossless).
// Every cycle also respects request.max_nodes (context room) and request.tokens_wanted. By default drafts are
// deterministic top-k choices (distribution -1), as the official EAGLE-2 treats its candidates at T > 0 too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/decoding/draft_tree.h"
#include "core/decoding/verify_cost.h"
#include "strategies/registry.h"

namespace draftlab {

// eagle2: EAGLE-2 (the eagle family).
const StrategyDescriptor& eagle2_strategy();

// The options as the strategy uses them; their defaults live in the option table (eagle2_strategy()).
struct Eagle2Options {
  int32_t total_tokens = 0;
  bool auto_budget = false;  // total_tokens=auto
  int32_t max_auto_tokens = 0;
  int32_t depth = 0;
  int32_t top_k = 0;
  bool rank_by_value = true;
  bool rerank = true;
  bool sample_tree = false;
  // total_tokens=auto with auto_cost=F/P/D (milliseconds): a forward of n tokens costs F + P n and drafting D per
  // cycle, fixed instead of measured, so the budget and the trees do not depend on the machine's speed or load
  // (tests, what-if studies). Empty: measured (VerifyCost::shared and the running drafting time).
  std::optional<VerifyCost> fixed_cost;
  double fixed_draft_seconds = 0.0;
};

// The eagle2 descriptor named `name` for heads of `family` (head_family.h): the same tree, options and factory.
// eagle2 is ("eagle2", eagle_heads()); eagle3 (strategies/eagle3/eagle3_strategy.cpp) builds on ("eagle3", "eagle3").
StrategyDescriptor eagle2_descriptor_for(const std::string& name, const HeadFamily& family);

// The `k` best of `candidates` (flat indices of `tree`) by value (or confidence), best first; ties to the lower
// index. The expansion step's choice.
std::vector<int32_t> eagle2_select(const DraftTree& tree, const std::vector<int32_t>& candidates, int32_t k,
                                   bool by_value);

// Reranking: the `count` nodes of `among` (all nodes when empty) with the highest value, ties to the shallower
// node, then to the lower index; returned in increasing flat order, ready for DraftTree::subtree.
std::vector<int32_t> eagle2_rerank(const DraftTree& tree, int32_t count, const std::vector<int32_t>& among = {});

}  // namespace draftlab
