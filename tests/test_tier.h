// The test tier a test process runs in (tests/CMakeLists.txt, docs/testing.md). DRAFTLAB_TEST_TIER=fast runs the
// costly tests in a smaller form (fewer prompts, fewer samples at the same false-alarm level); full, or unset (an
// executable run by hand), runs them at full size.
#pragma once

#include <cstdlib>
#include <cstring>

namespace draftlab::testing {

inline bool fast_tier() {
  const char* tier = std::getenv("DRAFTLAB_TEST_TIER");
  return tier != nullptr && std::strcmp(tier, "fast") == 0;
}

// `full` in the full tier, `fast` in the fast one.
template <typename T>
T tier_size(T full, T fast) {
  return fast_tier() ? fast : full;
}

}  // namespace draftlab::testing
