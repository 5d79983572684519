// Verifier - scores a whole draft tree in one target forward and accepts tokens so that the output is exactly
// what the target alone would produce: identical tokens at T = 0, identical distribution at T > 0.
//
// T = 0: walk down from the root; at each node take the target's argmax; accept the child carrying it (if any)
// and continue, else stop. The final argmax is the bonus token.
// T > 0: multi-round speculative sampling (EAGLE Algorithm 1, SpecInfer) at each node: p = the target's
// processed distribution (Sampler::distribution: temperature, top-k, top-p, as vanilla decoding uses); try the
// children in sibling order: accept child x with probability min(1, p(x) / q(x)), where q is the distribution
// x was sampled from (a point mass on x for deterministic drafts; for siblings drawn without replacement, q with
// the earlier siblings removed: DraftTree::draft_distribution); on rejection p <- norm(max(0, p - q)) and try the
// next child; if all are rejected, sample the next token from what remains of p. (Lossless for any q that is the
// law of the sibling given the ones before it: accepted with min(p, q), else the residual, by induction.)
// Afterwards the target KV cache keeps only the root and the accepted nodes (one compaction call).
// The tree's extra rows (draft_tree.h) run in the same forward after the tree rows; only their logits come back
// (VerifyResult::extra_logits). They are never accepted and never stay in the cache, and since no tree row sees
// them, they change nothing above (on the native path, not a bit).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "core/decoding/draft_tree.h"
#include "core/model/kv_cache.h"
#include "core/model/llama_model.h"
#include "core/model/sampler.h"

namespace draftlab {

// One drafted node's fate: cheap, plain data for acceptance, per-position and calibration statistics. Indices
// count verification rows, as results files do: the root is 0, flat tree node i is i + 1.
struct NodeRecord {
  int32_t depth = 0;
  int32_t tree_index = 0;  // the node's row: flat index + 1
  int32_t sibling_rank = 0;
  float confidence = 0.0f;
  float value = 0.0f;
  bool accepted = false;
  int32_t parent = 0;  // the parent's row: 0 = the root
};

struct VerifyResult {
  std::vector<int32_t> accepted_nodes;  // flat indices of the accepted path, root-to-leaf
  std::vector<int64_t> tokens;          // the accepted nodes' tokens, then the next token (bonus or correction)
  // Target features [1 + accepted_nodes.size(), d] (k d with feature layers): of the root and of each accepted node,
  // in order.
  // (EAGLE heads need them: the feature of token t_i feeds the prediction of t_{i+2}.)
  at::Tensor features;
  std::vector<NodeRecord> records;  // one per drafted node, in flat order
  // The target's logits [extra_size, vocab] (float32, CPU) of the tree's extra rows, in order; undefined when the
  // tree had none.
  at::Tensor extra_logits;
  int64_t experts_read = 0;  // ForwardOutput::experts_read of the verification forward (mixture of experts)
  // T > 0: drafted children the verifier actually tried and rejected (nodes below a rejection are never tried).
  int32_t rejections = 0;
  // Accepted draft nodes a commit limit dropped from the path, in path order (Verifier::set_commit_limit; none
  // without one).
  std::vector<int32_t> beyond_commit_limit;
  // Draft nodes the target agreed with: the accepted path before any commit limit cut it.
  int32_t matched() const { return static_cast<int32_t>(accepted_nodes.size() + beyond_commit_limit.size()); }
  std::vector<int32_t> matched_nodes() const;
  // The target's own token after the matched path: the last of `tokens` when no commit limit cut the path, else -1
  // (not computed).
  int64_t token_after_match() const { return beyond_commit_limit.empty() ? tokens.back() : -1; }
};

// T > 0: the distribution the verifier continues from after rejecting draft `token` (q: the distribution it was
// drawn from, undefined for a point mass) at target distribution p. Only residual_after_rejection keeps sampling
// lossless; the parameter exists so that tests can show a wrong rule is caught by the statistical checks.
using RejectionUpdate = at::Tensor (*)(const at::Tensor& p, int64_t token, const at::Tensor& q);

// norm(max(0, p - q)) (p without `token` for a point mass); p itself when that has no mass (p == q: the
// rejection was rounding).
at::Tensor residual_after_rejection(const at::Tensor& p, int64_t token, const at::Tensor& q);

// The rows one verification adds to the target's forward: row 0 the root, node i row i + 1, then the extra rows.
struct VerifyRows {
  int64_t start = 0;                       // the cache's length before the forward: the root's cache row
  std::vector<int64_t> tokens, positions;
  std::vector<uint8_t> mask;               // [rows, rows] ancestor mask; empty for the root alone
  SequenceRows sequence(KvCache& cache) const {
    return {&cache, tokens.data(), positions.data(), static_cast<int64_t>(tokens.size()),
            mask.empty() ? nullptr : mask.data()};
  }
};

class Verifier {
 public:
  // feature_layers: which features VerifyResult carries (DraftStrategy::target_feature_layers).
  Verifier(const LlamaModel& target, Sampler& sampler, RejectionUpdate on_rejection = residual_after_rejection,
           std::vector<int64_t> feature_layers = {});

  // cache holds the committed context without the root; the root goes at cache.length().
  // Throws Error if the tree and its extra rows do not fit the cache.
  VerifyResult verify(KvCache& cache, int64_t root_token, const DraftTree& tree);

  // verify() in two halves, for a batch whose trees share one target forward (speculative_decoder.h): the rows to
  // forward (throws Error if they do not fit the cache), then acceptance, cache compaction and records from that
  // forward's output for these rows.
  static VerifyRows rows(const KvCache& cache, int64_t root_token, const DraftTree& tree);
  VerifyResult accept(KvCache& cache, const DraftTree& tree, const VerifyRows& rows, const ForwardOutput& out);

  // Commit at most `nodes` accepted draft nodes per verification (-1: no limit, the default). Lossless at any
  // temperature: each accepted token is the target's own token (T = 0) or sample (T > 0) at its position, so a
  // prefix of the accepted path followed by its next accepted token is what the target alone would emit. With 0,
  // every position becomes a cycle start and VerifyResult::matched() counts what a draft from there would get
  // accepted: the oracle draft length (experiments' RunnerSettings::oracle).
  void set_commit_limit(int32_t nodes);

 private:
  const LlamaModel& target_;
  Sampler& sampler_;
  RejectionUpdate on_rejection_;
  ForwardOptions forward_options_;  // all logits, the strategy's features
  int32_t commit_limit_ = -1;
};

}  // namespace draftlab
