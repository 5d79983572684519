// ForwardClock - wall time spent inside model forwards (the target, a draft LM, EAGLE / Medusa / Hydra heads), per
// thread. The decoding loop reads it around each phase to report what a cycle costs beyond its forwards: top-k,
// scores, masks, tree bookkeeping, acceptance, cache compaction. On a tiny model (aidreams260K: ~45 us forwards)
// that remainder decides whether speculation can pay at all.
#pragma once

#include <chrono>

namespace draftlab {

class ForwardClock {
 public:
  // Seconds this thread has spent inside Scope objects so far (monotonic; take differences).
  static double seconds() { return total(); }

  // Times one forward. Nested scopes count once (the outermost): a head forward that calls into the target's LM
  // head is one forward.
  class Scope {
   public:
    Scope() : outer_(depth()++ == 0) {
      if (outer_) start_ = std::chrono::steady_clock::now();
    }
    ~Scope() {
      --depth();
      if (outer_) total() += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    bool outer_;
    std::chrono::steady_clock::time_point start_;
  };

 private:
  static double& total() {
    thread_local double seconds = 0.0;
    return seconds;
  }
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
};

}  // namespace draftlab
