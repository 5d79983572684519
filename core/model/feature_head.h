// FeatureHead - what the EAGLE strategies draft through (strategies/eagle_tree/eagle_drafter.h): a one-layer draft head with
// its own KV cache that reads rows of (token, feature) and returns a state per row, whose logits give the next
// token. Two families implement it:
//   EagleHead  (EAGLE-1/2, eagle_head.h)   features: the target's final normed hidden state; state: the predicted
//                                          next feature, read by the target's LM head
//   Eagle3Head (EAGLE-3, eagle3_head.h)    features: the target's low, middle and high layers side by side on
//                                          committed rows, the parent's state on draft rows; state: the layer's raw
//                                          output, read by the head's own norm and draft-vocabulary LM head
// Either way a committed row carries a true target feature and a draft row its parent's state, so the drafter's
// cache bookkeeping, tree attention and batching are the same code for both.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "core/model/kv_cache.h"

namespace draftlab {

class LlamaModel;

class FeatureHead {
 public:
  virtual ~FeatureHead() = default;

  // A cache for the head's single layer.
  virtual KvCache make_cache(int64_t capacity) const = 0;

  // The forward: several sequences' rows in one pass (batched drafting; one sequence is a batch of one), each with
  // its own cache. A sequence appends n rows at its cache rows [cache.length(), +n) and gets their states [n, d]:
  // tokens [n] int64, features [n, width] (a target feature or a state), positions [n] int64; visible
  // [n, cache.length() + n] bool says which cached and new rows each new row attends to (tree drafting: earlier
  // draft rows sit in the cache but only a node's ancestors may be seen); undefined = causal, the cached prefix
  // visible. On the native path the weights are read once for all rows and each sequence's states are bit for bit
  // those of the sequence alone; the reference path (and training, with gradients) runs them one after another.
  struct Rows {
    KvCache* cache = nullptr;
    at::Tensor tokens, features, positions, visible;
  };
  virtual std::vector<at::Tensor> forward_batch(const std::vector<Rows>& sequences) const = 0;

  // One sequence (forward_batch of one) with visible rows as above.
  at::Tensor forward_visible(KvCache& cache, const at::Tensor& tokens, const at::Tensor& features,
                             const at::Tensor& positions, const at::Tensor& visible) const;
  // One sequence with the target forward's contract: ancestor_mask [n, n] bool among the new rows (undefined =
  // causal), the cached prefix always visible.
  at::Tensor forward(KvCache& cache, const at::Tensor& tokens, const at::Tensor& features, const at::Tensor& positions,
                     const at::Tensor& ancestor_mask = {}) const;

  // Next-token logits [n, target vocab] float32 from states [n, d]; -inf outside a reduced draft vocabulary, so
  // drafted tokens are always target ids.
  virtual at::Tensor logits(const at::Tensor& states) const = 0;
  // softmax(logits): the head's raw next-token distribution (no temperature), EAGLE-2's "confidence".
  at::Tensor probabilities(const at::Tensor& states) const { return at::softmax(logits(states), -1); }

  // True when row i reads token t_i rather than t_{i+1} (EAGLE's feature_unshifted_token variant).
  virtual bool reads_unshifted_token() const { return false; }
  // The target features committed rows carry: DraftStrategy::target_feature_layers (empty: final normed hidden).
  virtual std::vector<int64_t> target_feature_layers() const { return {}; }

  virtual const LlamaModel& target() const = 0;
};

}  // namespace draftlab
