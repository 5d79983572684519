// What the parallel-head strategies share (medusa now; Hydra's heads fill the same trees): the draft tree they
// fill, chosen by option, and the top-k of one head's logits row.
//
// The tree is a TreeSpec of sibling ranks (static_tree.h). The parallel-head papers fill it so that the node at
// path (c_1 .. c_d) holds the c_d-th most probable token of head d - 1 (for Medusa: whatever c_1 .. c_{d-1} are,
// since its heads all read the same feature; Hydra's head d - 1 also reads the path's tokens). So:
//   tree=NAME|PATH   a tree file (default for Medusa: its own mc_sim_7b_63, data/trees/medusa_mc_sim_7b_63.json)
//   tree=cartesian   every path of ranks < top_k, down to the number of heads: top_k + top_k^2 + ... nodes
// Paths deeper than the number of heads are cut (no head predicts there).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/decoding/draft_strategy.h"
#include "strategies/registry.h"
#include "strategies/eagle_tree/static_tree.h"

namespace draftlab {

// What Medusa and Hydra share as strategies: the tree they fill and the feature they read, the target's feature of
// the token before the root (the prompt's last feature after prefill, then the last row of each verification's).
class ParallelHeadStrategy : public SequenceStrategy {
 public:
  ParallelHeadStrategy(std::string name, TreeSpec spec, int64_t heads)
      : name_(std::move(name)), spec_(std::move(spec)), heads_(heads) {}

  std::string name() const override { return name_; }
  void begin(const std::vector<int64_t>& prompt, const at::Tensor& prompt_features, int64_t root) override;
  void observe(const VerifyResult& result) override;

 protected:
  // How many of the tree's first paths this request can use (0: draft nothing); throws before begin().
  int32_t usable(const DraftRequest& request) const;
  const TreeSpec& spec() const { return spec_; }
  const at::Tensor& feature() const { return feature_; }  // [d]

 private:
  std::string name_;
  TreeSpec spec_;
  int64_t heads_;
  at::Tensor feature_;
};

// tree=, top_k= (top_k only with tree=cartesian).
std::vector<OptionSpec> parallel_head_tree_options(const std::string& default_tree);

// The tree those options name, cut to `depth` (the number of heads). Throws Error naming the option: a tree file
// that does not load, top_k given with a tree file, or a cartesian tree of more than 4096 nodes.
TreeSpec parallel_head_tree(const StrategyOptions& options, int32_t depth);

// Every path of sibling ranks < top_k down to `depth`, named "cartesian top_k=K depth=D".
TreeSpec cartesian_tree(int32_t top_k, int32_t depth);

// How many of the spec's first paths a draft may use: those no deeper than max_depth, at most max_nodes of them
// (paths are sorted by depth, so this prefix is a connected tree).
int32_t usable_paths(const TreeSpec& spec, int32_t max_depth, int32_t max_nodes);

// With head=PATH given, the random heads' shape options (`keys`) must not be: throws Error naming the first given.
void check_no_random_head_options(const StrategyOptions& options, std::initializer_list<const char*> keys);

// The min(k, vocab) most probable tokens of one logits row (float32, `vocab` values), most probable first (ties to
// the lower id), with their softmax probabilities (no temperature: the head's own confidence).
struct TopTokens {
  std::vector<int64_t> tokens;
  std::vector<float> probs;
};
TopTokens top_tokens(const float* logits, int64_t vocab, int64_t k);

}  // namespace draftlab
