// PARD's training (AMD-AGI/PARD, pard/pard_train.py; arXiv 2504.18583): a draft LM learns to fill K - 1 appended
// mask tokens in one forward. A window x_0 .. x_{L-1} is laid out as K copies: copy 0 holds the real tokens, copy
// i >= 1 holds the mask id at positions 0 .. L-1. Row (i, j) sees the real tokens at positions <= j - i and the
// mask rows (1, j-i+1), (2, j-i+2), ..., (i, j): exactly what the mask slot i of an inference forward sees after
// the real prefix x_0 .. x_{j-i}. Every row (i, j) predicts x_{j+1}.
// Conditional drop-off (COD) keeps copy 0 whole and, in copy i, floor(L max(r^i, r_min)) rows drawn among the
// successors (i, j + 1) of copy i - 1's kept rows, so a kept row's whole mask chain is kept.
// With a teacher (PARD-2's loss, pard/pard2_train.py; arXiv 2605.08632) the rows learn the target's distribution
// too, each weighted by how often the slot is reached (CAT).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model/llama_model.h"
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

// PARD-2's loss against the target the draft will serve (train-lm --teacher): per row (i, j),
//   ce_weight * CE(x_{j+1}) + kd_weight * KL(target's distribution after x_0 .. x_j || the row's),
// weighted by CAT = the target's probability of x_{j-i+1} .. x_j, the tokens the earlier slots must have drafted
// (and verification accepted) for slot i's draft to count: prod_t p(x_t | x_<t); the loss is the weighted mean.
// PARD-2's KL is at temperature 1; its ce_alpha 0.1, kd_alpha 1.0 are the defaults here.
struct ParallelDraftTeacher {
  std::shared_ptr<const LlamaModel> target;  // on the reference path (training_forward reads its float32 tensors)
  std::string path;                          // recorded by describe()
  bool cat = true;
  double ce_weight = 0.1, kd_weight = 1.0;
};

// Throws Error naming --loss-weights (both >= 0, not both 0) and, when vocab_size > 0, --teacher (a model of the
// draft's vocabulary).
void check_parallel_draft_teacher(const ParallelDraftTeacher& teacher, int64_t vocab_size);

// train-lm's objective for --parallel: mean cross-entropy of every kept row (i, j) against x_{j+1}; with a teacher,
// PARD-2's CAT-weighted cross-entropy and KL (above).
class ParallelDraftObjective : public LmObjective {
 public:
  // check_parallel_draft_teacher at once, and against the draft's vocabulary at each loss.
  explicit ParallelDraftObjective(ParallelDraftOptions options, std::shared_ptr<const ParallelDraftTeacher> teacher = nullptr);
  std::string describe() const override;
  at::Tensor loss(const ModelConfig& config, const LlamaWeights& weights, const RotaryEmbedding& rope,
                  const at::Tensor& windows, uint64_t seed) const override;
  const ParallelDraftOptions& options() const { return options_; }

 private:
  ParallelDraftOptions options_;
  std::shared_ptr<const ParallelDraftTeacher> teacher_;
};

// The mask id train-lm --mask-token auto picks: the highest id that never occurs in the corpus (token_counts:
// occurrences per id), so its embedding row carries nothing else. Throws Error when every id occurs.
int32_t unused_token(const std::vector<int64_t>& token_counts);

}  // namespace draftlab
