// auto_cost=F/P/D: the fixed costs a budget chosen per cycle (eagle2 total_tokens=auto, chain gamma=auto,
// eagle-chain depth=auto) may use instead of measured ones, so that its drafts do not depend on the machine's speed
// or load (the lossless tests, what-if studies): verifying n tokens costs F + P n milliseconds, drafting D (eagle2:
// per cycle; the chains: per drafted token).
#pragma once

#include <optional>
#include <string>

#include "core/decoding/verify_cost.h"

namespace draftlab {

struct FixedCosts {
  VerifyCost verify;     // F + P n, linear, extrapolated
  double draft_seconds;  // D
};

// "measured": none. F/P/D: three non-negative milliseconds with F + P > 0. Anything else: Error naming the strategy
// and the option.
std::optional<FixedCosts> parse_auto_cost(const std::string& strategy, const std::string& text);

}  // namespace draftlab
