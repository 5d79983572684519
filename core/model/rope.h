// Rotary position embeddings, Hugging Face "rotate halves" convention: dimension j pairs with j + head_dim/2.
// (llama2.c checkpoints rotate consecutive pairs; their q/k rows are permuted at load so one convention serves.)
// Positions are explicit per token, so tree nodes get depth-based positions while sharing cache rows.
#pragma once

#include <ATen/ATen.h>

#include "core/io/model_config.h"
#include "core/model/compute_options.h"

namespace draftlab {

class RotaryEmbedding {
 public:
  // Tables for positions [0, config.max_position_embeddings), computed in double precision, applying
  // rope_scaling ("llama3" frequency-band rescaling or "linear") when configured.
  RotaryEmbedding(const ModelConfig& config, const ComputeOptions& options);

  // cos and sin for the given positions, shaped [n, 1, head_dim/2] to broadcast over heads.
  std::pair<at::Tensor, at::Tensor> at_positions(const at::Tensor& positions) const;

  // x: [n, heads, head_dim] -> rotated copy.
  static at::Tensor apply(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

  int64_t max_positions() const { return cos_.size(0); }

  // The tables [max_positions, head_dim/2] in the compute dtype (the native path reads rows of them).
  const at::Tensor& cos_table() const { return cos_; }
  const at::Tensor& sin_table() const { return sin_; }

  // The inverse frequencies (head_dim/2 of them) after scaling; exposed for tests.
  static std::vector<double> inverse_frequencies(const ModelConfig& config);

 private:
  at::Tensor cos_, sin_;  // [max_positions, head_dim/2]
};

}  // namespace draftlab
