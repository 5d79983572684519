// How a draft model's logits become a draft node, at every temperature: chain, pard and dflash draft with it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "core/decoding/draft_tree.h"
#include "core/model/host_tensor.h"
#include "core/model/sampler.h"

namespace draftlab {

// Adds the token proposed by logits [vocab] under `parent`: at T = 0 the argmax (a point mass, its softmax
// probability as confidence); at T > 0 a draw from the sampler's processed distribution q, which the node records so
// that the verifier's min(1, p/q) keeps the output exactly the target's. Returns the node's index.
inline int32_t add_drafted_token(DraftTree& tree, const at::Tensor& logits, int32_t parent, Sampler& sampler) {
  if (sampler.params().greedy()) {
    const int64_t token = argmax_of(logits);
    return tree.add(token, parent, softmax_probability(logits, token));
  }
  const at::Tensor q = sampler.distribution(logits);
  const int64_t token = sampler.sample_from(q);
  return tree.add(token, parent, q[token].item<float>(), tree.add_distribution(q));
}

}  // namespace draftlab
