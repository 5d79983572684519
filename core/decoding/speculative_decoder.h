// SpeculativeDecoder - B sequences (B = 1 included) decoded together: a prefill, then cycles of draft (each
// sequence's strategy, DraftStrategy::propose_batch) / verify (all the trees in one target forward,
// LlamaModel::forward_batch: ragged rows, each sequence with its own mask, positions and KV cache) / accept (each
// sequence on its own: Verifier::accept, cache compaction, observe_batch), until a stop token, max_new_tokens or the
// end of the context. A sequence that stops leaves the batch; the others go on. With strategies that draft nothing
// this is (batched) vanilla decoding through the same loop, the baseline a speedup divides by.
//
// Lossless per sequence: the same tokens as the target's own decoding at T = 0 and the same distribution at T > 0;
// and a sequence's tokens do not depend on the batch it runs in (on the native path bit for bit, since a row's
// outputs never depend on the other rows of a forward; the reference path runs the sequences one after another).
// Strategies that run a model (the EAGLE family) share each head forward across the batch; each sequence's draft
// stays the one it would draft alone.
//
// Records per sequence and cycle: accepted length, drafted and accepted counts, draft and verify time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/decoding/draft_strategy.h"
#include "core/decoding/vanilla_decoder.h"
#include "core/decoding/verifier.h"

namespace draftlab {

struct CycleStats {
  int32_t drafted = 0;          // nodes in the tree
  int32_t accepted = 0;         // accepted draft nodes (the cycle emits accepted + 1 tokens, before truncation)
  double draft_seconds = 0.0;   // propose() + observe()
  double verify_seconds = 0.0;  // target forward + acceptance + cache compaction
  double forward_seconds = 0.0; // of draft + verify, the time inside model forwards (ForwardClock)
  int32_t experts_read = 0;     // mixture-of-experts target: (layer, expert) pairs the verification read
  int32_t rejected = 0;         // T > 0: drafted nodes tried and rejected (VerifyResult::rejections)
  int32_t matched = 0;          // accepted before a commit limit cut the path (VerifyResult::matched())
};

struct SpeculativeResult : GenerationResult {
  std::vector<CycleStats> cycles;
  std::vector<NodeRecord> records;      // every drafted node of every cycle
  std::vector<int32_t> record_cycle;    // cycle index of each record

  // tau, EAGLE's "average acceptance length": tokens per cycle (accepted drafts + the verifier's own token).
  double tau() const;
  double draft_seconds() const;
  double verify_seconds() const;
  double forward_seconds() const;
  // What a cycle costs beyond its forwards, mean over cycles (seconds): the strategy's and verifier's own work.
  double overhead_per_cycle() const;
};

// The target cache a speculative generation allocates: prompt + max_new_tokens plus room for the last cycles'
// trees, within the context.
int64_t speculative_cache_capacity(int64_t context, int64_t prompt_tokens, int64_t max_new_tokens);

struct BatchSequence {
  std::vector<int64_t> prompt;
  uint64_t seed = 0;     // its sampler's seed: GenerationConfig::seed of the same sequence decoded alone
  TokenCallback on_token = {};  // called with each token this sequence emits, as it is accepted (streaming)
};

struct BatchResult {
  // Per sequence, except the times a batch shares: prefill_seconds is the batched prefill's, decode_seconds runs
  // until this sequence stopped, and a cycle's draft_seconds, verify_seconds and forward_seconds count this
  // sequence's 1/B share of the batch's drafting and verification forward (plus its own acceptance).
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

class SpeculativeDecoder {
 public:
  // One strategy per sequence (strategies keep per-sequence state), all made by the same descriptor with the same
  // options; generate() takes as many sequences.
  SpeculativeDecoder(const LlamaModel& target, std::vector<DraftStrategy*> strategies,
                     RejectionUpdate on_rejection = residual_after_rejection);
  // One sequence: a batch of one.
  SpeculativeDecoder(const LlamaModel& target, DraftStrategy& strategy,
                     RejectionUpdate on_rejection = residual_after_rejection)
      : SpeculativeDecoder(target, std::vector<DraftStrategy*>{&strategy}, on_rejection) {}

  // Same contract per sequence as generate_vanilla (errors, stop rules, context bound); config.seed unused (each
  // sequence has its own). Throws Error (naming the sequence in a batch of several) for an empty prompt or one that
  // does not fit the context, or when the number of sequences is not the number of strategies.
  BatchResult generate(const std::vector<BatchSequence>& sequences, const GenerationConfig& config);

  // One sequence (config.seed its seed): generate() of a batch of one.
  SpeculativeResult generate(const std::vector<int64_t>& prompt, const GenerationConfig& config,
                             const TokenCallback& on_token = {});

  // Every sequence's verifier commits at most `nodes` accepted draft nodes per cycle (Verifier::set_commit_limit;
  // -1, the default: no limit). 0 makes every position of the answer a cycle start, CycleStats::matched its oracle
  // draft length.
  void set_commit_limit(int32_t nodes) { commit_limit_ = nodes; }

 private:
  const LlamaModel& target_;
  std::vector<DraftStrategy*> strategies_;
  RejectionUpdate on_rejection_;
  int32_t commit_limit_ = -1;
};

}  // namespace draftlab
