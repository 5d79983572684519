#include "strategies/draft_skipping.h"

#include <algorithm>

namespace draftlab {

void DraftSkipping::Rate::add(double t, double s) {
  if (weight >= 1.0) s = std::min(s, kOutlier * seconds / weight);
  tokens = memory * tokens + t;
  seconds = memory * seconds + s;
  weight = memory * weight + 1.0;
}

void DraftSkipping::Rate::age(double factor) {
  tokens *= factor;
  seconds *= factor;
  weight *= factor;
}

void DraftSkipping::begin() {
  skipping_ = measuring_ = false;
  cycle_open_ = false;
  sequence_start_ = true;
}

void DraftSkipping::close_cycle(Clock::time_point now) {
  if (!measure_rates_ || !cycle_open_) return;
  const double seconds = std::chrono::duration<double>(now - cycle_start_).count();
  if (seconds <= 0.0) return;  // a clock that did not move (tests) measures nothing
  if (!cycle_drafted_) plain_.add(1.0, seconds);
  else if (!cycle_starts_sequence_) drafting_.add(static_cast<double>(cycle_tokens_), seconds);
  // A probe after skipped cycles first takes in what its draft missed: a cost of drafting now and then, counted (a
  // head that catches up on every stretch it skipped cost P-EAGLE 6% on AVX2 while drafting in 3% of cycles). A
  // sequence's first cycle takes in the prompt: sunk once paid, whatever drafting does next, so not counted.
}

bool DraftSkipping::drafts_this_cycle() {
  const Clock::time_point now = now_();
  close_cycle(now);
  measuring_ = measure_rates_ && last_paid_ && ++drafted_since_measure_ >= kMeasureEvery;
  if (measuring_) drafted_since_measure_ = 0;
  skipping_ = measuring_ || (!last_paid_ && ++cycles_without_draft_ % probe_every_ != 0);
  // What drafting earned weighs less after a stretch without it (kSkippedMemory).
  if (skipping_) drafting_.age(kSkippedMemory);
  cycle_open_ = true;
  cycle_start_ = now;
  cycle_tokens_ = 1;
  cycle_drafted_ = !skipping_;
  cycle_starts_sequence_ = sequence_start_;
  sequence_start_ = false;
  return !skipping_;
}

DraftSkipping::Measured DraftSkipping::measured() const {
  if (!measure_rates_ || drafting_.weight < kKnownDrafting || plain_.weight < kKnownPlain) return Measured::Unknown;
  const double drafting = drafting_.per_second(), plain = plain_.per_second();
  if (drafting < kMargin * plain) return Measured::Slower;
  return drafting > plain ? Measured::Faster : Measured::Unknown;  // within the margin: a tie
}

void DraftSkipping::chose(bool pays) {
  const Measured drafting = measured();
  pays = pays && drafting != Measured::Slower;
  if (pays) {
    ++paying_in_a_row_;
    cycles_without_draft_ = 0;
  } else {
    // A probe that did not pay, or a stop the clock confirms, backs off; a stop it contradicts probes again soon; one
    // it cannot judge (yet) keeps the interval. Without the clock, the stretch's length judges: one that did not last
    // (a probe that paid by chance) backs off, one that did probes again soon.
    const bool back_off = measure_rates_ ? drafting == Measured::Slower : paying_in_a_row_ < kLasting;
    if (!last_paid_ || back_off)
      probe_every_ = std::min(2 * probe_every_, kMaxProbeEvery);
    else if (!measure_rates_ || drafting == Measured::Faster)
      probe_every_ = kProbeEvery;
    paying_in_a_row_ = 0;
  }
  last_paid_ = pays;
}

}  // namespace draftlab
