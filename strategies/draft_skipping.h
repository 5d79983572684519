// DraftSkipping - for a budget that may choose "do not draft" (eagle2 total_tokens=auto, chain gamma=auto,
// eagle-chain depth=auto): once a cycle's choice says drafting does not pay, the next cycles skip drafting, but for
// probes (a full draft) whose interval doubles while they keep finding that it does not. On a target where no draft
// pays, probing every 8th cycle cost a third of the time.
#pragma once

#include <algorithm>

namespace draftlab {

class DraftSkipping {
 public:
  // A new sequence: this cycle drafts (what was learned about paying is kept).
  void begin() { skipping_ = false; }

  // At the start of a cycle: false when the last choice was not to draft and this is not a probe cycle. skipping()
  // keeps the answer until the next cycle.
  bool drafts_this_cycle() {
    skipping_ = !last_paid_ && ++cycles_without_draft_ % probe_every_ != 0;
    return !skipping_;
  }
  bool skipping() const { return skipping_; }

  // A drafting cycle's verdict: whether drafting (its cost included) beats plain decoding.
  void chose(bool pays) {
    if (!last_paid_) probe_every_ = pays ? kProbeEvery : std::min(2 * probe_every_, kMaxProbeEvery);
    last_paid_ = pays;
    if (pays) cycles_without_draft_ = 0;
  }

 private:
  static constexpr int kProbeEvery = 8, kMaxProbeEvery = 256;
  int probe_every_ = kProbeEvery;
  int cycles_without_draft_ = 0;
  bool last_paid_ = true;
  bool skipping_ = false;
};

}  // namespace draftlab
