// EagleDrafter - what every EAGLE-style strategy (eagle-chain, static-tree, eagle2) shares: the head's own KV
// cache kept in step with the accepted sequence, and expand(), one head forward over a set of tree nodes.
//
// The feature/token shift. The target maps token t_i to feature f_i (its final normed hidden state), and
// LM_head(f_i) gives the distribution of t_{i+1}. The head's input at head row i is the PAIR (t_{i+1}, f_i): the
// feature of position i together with the token sampled from it (one step ahead: this is what resolves EAGLE's
// "feature uncertainty"), and its output predicts f_{i+1}, from which LM_head gives the distribution of t_{i+2}.
//
// With sequence t_0 .. t_L, where t_L = the root (accepted but not yet run through the target, so f_L is unknown),
// the committed head rows are the pairs i = 0 .. L-1, all built from TRUE target features:
//     row i = (t_{i+1}, f_i)          the last one, row L-1, is (root, f_{L-1})
// Row L-1's output is the head's prediction of the root's own feature f_L, so LM_head of it gives the root's
// children: depth 1 needs no extra forward. A depth-k node x then enters as (x, predicted feature of its parent)
// at head position (L-1) + k, i.e. the root pair's position plus the node's depth (the official code's positions).
//
// Keeping the cache in sync:
//   begin(prompt t_0..t_{P-1}, features f_0..f_{P-1}, first token t_P): feeds the P pairs (t_{i+1}, f_i), the last
//     being (first root, f_{P-1}).
//   propose: expand() appends draft rows (pairs with PREDICTED features) after the committed rows.
//   observe(result): drops every draft row (truncate), then feeds the m + 1 new true pairs
//     (a_1, f_root), (a_2, f_{a_1}), ..., (next root, f_{a_m})
//     i.e. zip(result.tokens, result.features): tokens = accepted tokens then the next root, features = the
//     target's features of the old root and of the accepted nodes. The accepted nodes' rows are recomputed rather
//     than kept, because during drafting they were built from predicted features; the target's true ones are
//     better (and what the official implementation does).
// Invariant between cycles: head cache length == sequence.size() - 1, checked at every propose.
//
// Input variants (eagle_head.h): a row always carries the feature above; its token is t_{i+1} as described for
// feature_shifted_token, token_only and feature_only (which ignores it), and t_i for feature_unshifted_token, i.e.
// a draft node's row then reads its parent's token. A reduced-vocabulary head's logits are -inf outside its
// draft vocabulary, so the strategies draft target ids and never a token the head cannot propose.
//
// EAGLE-3 (eagle3_head.h) runs the same bookkeeping through the FeatureHead interface: "feature" is then the
// target's three-layer feature on committed rows (the strategies ask the decoder for it through
// DraftStrategy::target_feature_layers) and the head's raw layer output ("predicted feature" above) on draft rows,
// which is exactly the official EAGLE-3 drafting loop (spec 3.2-3.3).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/decoding/draft_strategy.h"
#include "core/model/feature_head.h"
#include "strategies/head_family.h"
#include "strategies/registry.h"

namespace draftlab {

// The k most probable next tokens of one expanded node, most probable first, with the head's probabilities
// (softmax of its raw logits, no temperature: EAGLE-2's confidence).
struct Candidates {
  std::vector<int64_t> tokens;
  std::vector<float> probs;
};

// Per row of logits [n, vocab]: the top min(k, vocab) tokens. One softmax and one topk for all rows.
std::vector<Candidates> top_candidates(const at::Tensor& logits, int64_t k);

class EagleDrafter {
 public:
  // Stands for the root in expand()'s frontier.
  static constexpr int32_t kRoot = -1;

  explicit EagleDrafter(std::shared_ptr<const FeatureHead> head);

  void begin(const std::vector<int64_t>& prompt, const at::Tensor& prompt_features, int64_t first_token);
  void observe(const VerifyResult& result);
  // observe() deferred: the new pairs are kept and fed in one forward when drafting resumes (start_tree, or the next
  // observe), for a strategy that is not drafting now (EAGLE-2 auto at budget 0) and would otherwise pay a head
  // forward per cycle that nothing reads. The head's rows, and so every later draft, are the same either way on the
  // native path (row-independent kernels); the reference path may round them differently.
  void observe_later(const VerifyResult& result);

  // Starts a new tree under request.sequence.back(): drops the previous tree's rows and per-node state. Throws
  // Error if begin()/observe() have not seen the sequence (the head would draft from the wrong context).
  void start_tree(const DraftRequest& request);

  // One head forward over `frontier` (nodes of `tree`, or kRoot), returning next-token logits [frontier.size(),
  // vocab] float32 on the compute device: row j is the head's distribution of the children of frontier[j].
  // Each node enters as (its token, its parent's predicted feature) at position root + depth and attends to the
  // committed rows, its ancestors' draft rows and itself (tree attention through an ancestor mask). Its parent
  // must be the root or a node expanded earlier in this tree; a node is expanded at most once. kRoot costs no
  // forward: its prediction is the last committed row's output.
  at::Tensor expand(const DraftTree& tree, const std::vector<int32_t>& frontier);

  // Batched drafting (speculative_decoder.h): expand() for several sequences' drafters at once, one head forward and one
  // LM head product for all of them; each result equals its own expand()'s (on the native path bit for bit).
  // Drafters of different heads, or on the reference path, expand one by one.
  static std::vector<at::Tensor> expand_batch(const std::vector<EagleDrafter*>& drafters,
                                              const std::vector<const DraftTree*>& trees,
                                              const std::vector<std::vector<int32_t>>& frontiers);
  // observe() for several drafters at once (their sync forwards batched likewise).
  static void observe_batch(const std::vector<EagleDrafter*>& drafters, const std::vector<const VerifyResult*>& results);

  const FeatureHead& head() const { return *head_; }
  int64_t head_forwards() const { return head_forwards_; }  // every head forward so far (sync + drafting)

 private:
  // Feeds committed pairs at rows [committed_, +n) and keeps the last output as the root prediction. tokens are
  // t_{i+1} of each row (the last is the new root); token_before is t_i of the first row, which the unshifted
  // input variant reads instead. In two halves for batches: the head rows, then taking the head's output.
  void feed_pairs(const std::vector<int64_t>& tokens, const at::Tensor& features, int64_t token_before);
  FeatureHead::Rows pair_rows(const std::vector<int64_t>& tokens, const at::Tensor& features, int64_t token_before);
  void pairs_fed(const std::vector<int64_t>& tokens, const at::Tensor& out);
  void check_observed(const VerifyResult& result) const;
  void catch_up();  // feeds the pairs observe_later() kept

  // expand() in halves: the head rows of the frontier's nodes (none when the frontier is the root alone), then
  // recording the head's output for them and returning the frontier's predicted features [frontier, d].
  struct Expansion {
    std::vector<int32_t> nodes;  // the frontier without the root: these need a forward
    int64_t start = 0;           // their first head cache row
    FeatureHead::Rows rows;
  };
  Expansion plan_expansion(const DraftTree& tree, const std::vector<int32_t>& frontier);
  at::Tensor finish_expansion(const Expansion& plan, const std::vector<int32_t>& frontier, const at::Tensor& out);
  void ensure_room(int64_t rows);

  std::shared_ptr<const FeatureHead> head_;
  std::optional<KvCache> cache_;
  int64_t committed_ = 0;      // head rows built from true features: sequence.size() - 1 once in sync
  int64_t root_token_ = -1;    // the token of the last committed pair (the current root)
  at::Tensor root_prediction_; // [1, d]: the head's prediction of the root's feature
  int64_t head_forwards_ = 0;
  // observe_later()'s pairs, not fed yet: their tokens, features, and the token before the first.
  std::vector<int64_t> pending_tokens_;
  std::vector<at::Tensor> pending_features_;
  int64_t pending_token_before_ = -1;

  // Per node of the tree being drafted (index = flat node index; -1 = not expanded yet).
  std::vector<int64_t> node_row_;    // head cache row
  std::vector<int32_t> node_block_;  // which expand() output holds its predicted feature
  std::vector<int64_t> node_slot_;   // row within that output
  std::vector<at::Tensor> blocks_;   // the outputs [n_k, d] of this tree's expand() calls
};

// The options every EAGLE strategy shares, for a head of `family` (eagle or eagle3: HeadFamily::load_feature_head): head=PATH loads a
// trained head (folder or .safetensors) of that family; absent, a randomly initialised one with head_seed, shaped
// like the target, with draft_vocab=K (0: the full vocabulary; K random distinct target ids drawn from head_seed)
// and, for EAGLE-1/2, head_input=VARIANT: the last two for tests of every head kind.
std::vector<OptionSpec> eagle_head_options(const HeadFamily& family);

// Rules across those options, before any model loads: Error when an option that shapes a random head is given
// beside head=PATH (a trained head's config.json says what it is).
void check_eagle_head_options(const HeadFamily& family, const StrategyOptions& options);

// The head an EAGLE strategy drafts with, from the options above. Throws Error when head=PATH is a head of
// another family (naming the strategy that runs it).
std::shared_ptr<const FeatureHead> eagle_head_from_options(const StrategyContext& context,
                                                           const StrategyOptions& options,
                                                           const HeadFamily& family);

}  // namespace draftlab
