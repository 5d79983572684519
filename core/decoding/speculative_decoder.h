// SpeculativeDecoder - prefill, then cycles of draft (strategy) / verify (Verifier) / update, until a stop
// token, max_new_tokens or the end of the context. With an empty draft it is vanilla decoding through the same
// loop. Records per-cycle statistics: accepted length, drafted and accepted counts, draft and verify time.
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

class SpeculativeDecoder {
 public:
  SpeculativeDecoder(const LlamaModel& target, DraftStrategy& strategy,
                     RejectionUpdate on_rejection = residual_after_rejection);

  // Same contract as generate_vanilla (errors, stop rules, context bound); the same tokens at T = 0 and the same
  // distribution at T > 0.
  SpeculativeResult generate(const std::vector<int64_t>& prompt, const GenerationConfig& config,
                             const TokenCallback& on_token = {});

 private:
  const LlamaModel& target_;
  DraftStrategy& strategy_;
  RejectionUpdate on_rejection_;
};

}  // namespace draftlab
