// DraftSkipping - for a budget that may choose "do not draft" (eagle2 total_tokens=auto, chain gamma=auto,
// eagle-chain depth=auto, the parallel drafters' k=auto): once a cycle's choice says drafting does not pay, the next
// cycles skip drafting, but for probes (a full draft) whose interval doubles while they keep finding that it does not.
// On a target where no draft pays, probing every 8th cycle cost a third of the time.
//
// With measure_rates (a budget whose costs are measured, not given by auto_cost), the choices are also checked against
// the clock: each cycle's wall time, from its start to the next one's, over the tokens it committed, as drafting
// and as plain decoding (the skipped cycles, and one cycle in kMeasureEvery while drafting pays). Where drafting's
// measured rate is below plain decoding's (by kMargin), it stops whatever the cost model says: the model prices the
// draft and the verify forward, not the rest of a cycle (the tree's bookkeeping, the mask, the cache's compaction),
// and drafted where it lost (eagle2 total_tokens=auto on AVX2, q4_0 with int8 dot products: 0.84-0.88x vanilla).
//
// The clock also sets the probe interval. A stop it confirms (drafting measured slower) doubles the interval, and a
// probe that pays resumes drafting without setting it back: where probes look good by chance and the cycles after
// them lose (P-EAGLE on AVX2), each probe bought several losing cycles every 8. A stop the clock contradicts (drafting
// measured faster) probes again every 8th cycle: a cost model's verdict swings with the context from cycle to cycle,
// and one bad cycle must not stop drafting that pays for long. Without the clock, a stretch that stops within kLasting
// cycles backs off, and one that lasted probes again every 8th cycle.
#pragma once

#include <chrono>
#include <cstdint>

namespace draftlab {

class DraftSkipping {
 public:
  using Clock = std::chrono::steady_clock;

  // Whether the choices are checked against the measured rates (above).
  void measure_rates(bool on) { measure_rates_ = on; }
  // A new sequence (what was learned about paying is kept): the time since the last cycle holds another sequence's
  // end and this one's prefill, and this sequence's first drafting cycle takes in its prompt.
  void begin();

  // At the start of a cycle: false when the last choice was not to draft and this is not a probe, or when this
  // cycle measures plain decoding. skipping() and measuring() keep the answer until the next cycle.
  bool drafts_this_cycle();
  bool skipping() const { return skipping_; }
  // This skipped cycle only measures plain decoding's rate: drafting pays and goes on next cycle (a budget keeps its
  // state as after a drafting cycle, not a probe's).
  bool measuring() const { return measuring_; }
  // The tokens this cycle committed (a drafting cycle: accepted + 1; a skipped one commits 1).
  void committed(int64_t tokens) { cycle_tokens_ = tokens; }

  // A drafting cycle's verdict by the cost model: whether drafting (its cost included) beats plain decoding.
  void chose(bool pays);

  // Tests: the clock cycles are timed by.
  void use_clock(Clock::time_point (*now)()) { now_ = now; }

 private:
  // Tokens over seconds, each sample weighing `memory` times the one after it; weight: the samples' summed weights.
  struct Rate {
    double memory;
    double tokens = 0, seconds = 0, weight = 0;
    void add(double t, double s);  // s clipped at kOutlier times the mean
    void age(double factor);
    double per_second() const { return tokens / seconds; }
  };
  void close_cycle(Clock::time_point now);
  // Drafting against plain decoding on the clock (Unknown: too few samples, not measured, or within kMargin).
  enum class Measured { Unknown, Slower, Faster };
  Measured measured() const;

  static constexpr int kProbeEvery = 8, kMaxProbeEvery = 256;
  static constexpr int kMeasureEvery = 32;
  // Drafting's rate swings with the context (1 to 5 tokens a cycle): a long memory, and the samples' weight it needs
  // before it can stop drafting. Skipped cycles age it more slowly, so that a stop's evidence outlasts the probe
  // intervals it doubles (at 0.97 it expired as fast as short stretches renewed it, and the interval stayed at 16),
  // and expires after 50-140 of them: then the cost model decides the next probe again. Plain decoding's rate hardly
  // swings.
  static constexpr double kDraftingMemory = 0.97, kKnownDrafting = 12.0, kSkippedMemory = 0.99;
  static constexpr double kPlainMemory = 0.9, kKnownPlain = 3.0;
  // A cycle counts at most kOutlier times the mean so far: one cycle the machine stalled (50 ms against 2) would weigh
  // as much as 25. Drafting stops only when measured slower than plain decoding by more than kMargin: a smaller loss
  // is within the noise of the ratio of two running means.
  static constexpr double kOutlier = 4.0, kMargin = 0.97;
  // Drafting cycles in a row that paid for a stretch to count as lasting (the verdicts' memory is about 5 cycles).
  static constexpr int kLasting = 16;
  int probe_every_ = kProbeEvery;
  int cycles_without_draft_ = 0;
  int paying_in_a_row_ = kLasting;  // the drafting before the first stop counts as lasting: that stop probes every 8th
  bool last_paid_ = true;
  bool skipping_ = false, measuring_ = false;

  bool measure_rates_ = false;
  Clock::time_point (*now_)() = &Clock::now;
  Rate drafting_{kDraftingMemory}, plain_{kPlainMemory};
  int drafted_since_measure_ = 0;
  bool cycle_open_ = false;   // a cycle started in this sequence, not yet timed
  bool cycle_drafted_ = false;
  bool sequence_start_ = true, cycle_starts_sequence_ = false;  // the cycle that takes in a sequence's prompt
  Clock::time_point cycle_start_;
  int64_t cycle_tokens_ = 1;
};

}  // namespace draftlab
