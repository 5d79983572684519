// A reduced draft vocabulary (d2t): the ids a head's LM head keeps, the most frequent tokens of the run's training
// rows. Every family that trains one (EAGLE-1/2's --draft-vocab, EAGLE-3's draft_vocab_size) builds it here and
// differs only in which tokens it counts.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "core/training/head_training.h"
#include "core/training/text_dataset.h"

namespace draftlab {

enum class DraftVocabularyCount {
  RealTokens,       // every real token of each row (padding is not text): EAGLE-1/2
  PredictedTokens,  // the tokens the loss predicts, w_1 .. w_T, where the loss mask holds when the data has one:
                    // EAGLE-3 (its spec and the official trainers)
};

// The k most frequent ids, counted over every training row the run will see (its batches depend on (seed, step)
// only, so a resumed run rebuilds the same map), ties to the lower id, sorted by id. Undefined for k = 0 or
// k = vocab (the whole vocabulary needs no map). Throws Error naming --draft-vocab unless 0 <= k <= vocab.
at::Tensor training_draft_vocabulary(const TextDataset& data, const HeadTrainingOptions& options, int64_t vocab,
                                     int64_t k, DraftVocabularyCount count);

// The k most frequent ids of `tokens` (int64 tensors of any shape, ids in [0, vocab)), ties to the lower id,
// sorted by id. Throws Error unless 1 <= k <= vocab.
at::Tensor most_frequent_tokens(const std::vector<at::Tensor>& tokens, int64_t vocab, int64_t k);

}  // namespace draftlab
