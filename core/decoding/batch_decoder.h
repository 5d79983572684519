// BatchSpeculativeDecoder - B sequences decoded together: every cycle each sequence still going drafts its own tree
// (its own strategy object), all the trees are verified in one target forward (LlamaModel::forward_batch: ragged
// rows, each sequence with its own mask, positions and KV cache), and each sequence accepts tokens, compacts its
// cache and informs its strategy on its own. A sequence that stops leaves the batch; the others go on.
//
// Lossless per sequence: each sequence's tokens equal what SpeculativeDecoder produces for it alone with the same
// seed (on the native path bit for bit, since a row's outputs never depend on the other rows of a forward; the
// reference path runs the sequences one after another). With strategies that draft nothing this is batched
// vanilla decoding, the baseline a batched speedup divides by.
//
// Drafting: one strategy gets every sequence's request and result (DraftStrategy::propose_batch / observe_batch).
// The EAGLE chain and EAGLE-2 share each head forward and LM head product across the batch on the native path;
// other strategies draft one sequence after another. Each sequence's draft stays the one it would draft alone.
#pragma once

#include <cstdint>
#include <vector>

#include "core/decoding/draft_strategy.h"
#include "core/decoding/speculative_decoder.h"

namespace draftlab {

struct BatchSequence {
  std::vector<int64_t> prompt;
  uint64_t seed = 0;  // its sampler's seed: GenerationConfig::seed of the same sequence decoded alone
};

struct BatchResult {
  // Per sequence, as SpeculativeDecoder reports it alone, except the times a batch shares: prefill_seconds is the
  // batched prefill's, decode_seconds runs until this sequence stopped, and a cycle's draft_seconds, verify_seconds
  // and forward_seconds count this sequence's 1/B share of the batch's drafting and verification forward (plus its
  // own acceptance).
  std::vector<SpeculativeResult> sequences;
  double prefill_seconds = 0.0;   // the batched prefill
  double decode_seconds = 0.0;    // after the prefill until the last sequence stopped
  int64_t forwards = 0;           // batched target forwards, prefill included
  std::vector<int32_t> batch_rows;  // per verification forward: its rows (every sequence's root + tree + extras)
  std::vector<int32_t> batch_active;  // per verification forward: the sequences in it

  int64_t tokens() const;
  // Throughput: every sequence's tokens over prefill + decode.
  double tokens_per_second() const;
};

class BatchSpeculativeDecoder {
 public:
  // One strategy per sequence (strategies keep per-sequence state); generate() takes as many sequences.
  BatchSpeculativeDecoder(const LlamaModel& target, std::vector<DraftStrategy*> strategies,
                          RejectionUpdate on_rejection = residual_after_rejection);

  // config as for SpeculativeDecoder::generate (config.seed unused: each sequence has its own). Throws Error naming
  // the sequence for an empty prompt or one that does not fit the context, or when the number of sequences is not
  // the number of strategies.
  BatchResult generate(const std::vector<BatchSequence>& sequences, const GenerationConfig& config);

 private:
  const LlamaModel& target_;
  std::vector<DraftStrategy*> strategies_;
  RejectionUpdate on_rejection_;
};

}  // namespace draftlab
