// PARD's training (AMD-AGI/PARD, pard/pard_train.py; arXiv 2504.18583): a draft LM learns to fill K - 1 appended
// mask tokens in one forward. A window x_0 .. x_{L-1} is laid out as K copies: copy 0 holds the real tokens, copy
// i >= 1 holds the mask id at positions 0 .. L-1. Row (i, j) sees the real tokens at positions <= j - i and the
// mask rows (1, j-i+1), (2, j-i+2), ..., (i, j): exactly what the mask slot i of an inference forward sees after
// the real prefix x_0 .. x_{j-i}. Every row (i, j) predicts x_{j+1}.
// Conditional drop-off (COD) keeps copy 0 whole and, in copy i, floor(L max(r^i, r_min)) rows drawn among the
// successors (i, j + 1) of copy i - 1's kept rows, so a kept row's whole mask chain is kept.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/training/language_model_training.h"

namespace draftlab {

struct ParallelDraftOptions {
  int64_t k = 8;               // tokens drafted per forward (PARD's para_num): K - 1 mask copies
  double cod_ratio = 0.7;      // r (1 = no drop-off: every copy whole)
  double cod_min_ratio = 0.2;  // r_min
  int32_t mask_token = -1;     // the id of the mask copies
};

// Throws Error naming --parallel / --cod / --mask-token when out of range (mask_token against vocab_size).
void check_parallel_draft_options(const ParallelDraftOptions& options, int64_t vocab_size);

// The rows of one window of `length` tokens, copy-major and by position within a copy.
struct ParallelDraftRows {
  std::vector<int64_t> copy;      // 0 = the real tokens, i = the i-th mask copy
  std::vector<int64_t> position;  // j: RoPE position and the window position it predicts the successor of
  int64_t size() const { return static_cast<int64_t>(copy.size()); }
};

// COD's rows for a window of `length` tokens (every row of every copy when cod_ratio is 1), drawn from `seed`.
ParallelDraftRows parallel_draft_rows(int64_t length, const ParallelDraftOptions& options, uint64_t seed);

// The additive attention mask [R, R] of those rows (0 = row a sees row b, -inf otherwise), float32.
at::Tensor parallel_draft_mask(const ParallelDraftRows& rows);

// The logits [B, R, vocab] of rows for windows [B, L + 1] (inputs: the first L tokens).
at::Tensor parallel_draft_logits(const ModelConfig& config, const LlamaWeights& weights, const RotaryEmbedding& rope,
                                 const at::Tensor& windows, const ParallelDraftRows& rows, int32_t mask_token);

// train-lm's objective for --parallel: mean cross-entropy of every kept row (i, j) against x_{j+1}.
class ParallelDraftObjective : public LmObjective {
 public:
  explicit ParallelDraftObjective(ParallelDraftOptions options) : options_(options) {}
  std::string describe() const override;
  at::Tensor loss(const ModelConfig& config, const LlamaWeights& weights, const RotaryEmbedding& rope,
                  const at::Tensor& windows, uint64_t seed) const override;
  const ParallelDraftOptions& options() const { return options_; }

 private:
  ParallelDraftOptions options_;
};

// The mask id train-lm --mask-token auto picks: the highest id that never occurs in the corpus (token_counts:
// occurrences per id), so its embedding row carries nothing else. Throws Error when every id occurs.
int32_t unused_token(const std::vector<int64_t>& token_counts);

}  // namespace draftlab
