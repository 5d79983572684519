// auto_cost=F/P/D: the fixed costs a budget chosen per cycle (eagle2 total_tokens=auto, chain gamma=auto,
// eagle-chain depth=auto) may use instead of measured ones, so that its drafts do not depend on the machine's speed
// or load (the lossless tests, what-if studies): verifying n tokens costs F + P n milliseconds, drafting D (eagle2:
// per cycle; the chains: per drafted token). Also the option's table row and its rule, for every such strategy.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/decoding/verify_cost.h"
#include "strategies/option_spec.h"
#include "strategies/strategy_options.h"

namespace draftlab {

struct FixedCosts {
  VerifyCost verify;     // F + P n, linear, extrapolated
  double draft_seconds;  // D
};

// "measured": none. F/P/D: three non-negative milliseconds with F + P > 0. Anything else: Error naming the strategy
// and the option.
std::optional<FixedCosts> parse_auto_cost(const std::string& strategy, const std::string& text);

// The auto_cost row of the option table of a strategy whose option `budget` takes "auto"; D is per `draft_unit`
// ("cycle", "token").
OptionSpec auto_cost_option(const std::string& budget, const std::string& draft_unit);

// Whether options[budget] is "auto"; Error naming the strategy when auto_cost is given without it or is malformed.
bool automatic_budget(const std::string& strategy, const StrategyOptions& options, const std::string& budget);
// The same for a strategy with several budget options (dflash: k, ddtree_nodes): which of them is "auto" ("" for
// none); Error when more than one is, or as above.
std::string automatic_budget(const std::string& strategy, const StrategyOptions& options,
                             const std::vector<std::string>& budgets);

}  // namespace draftlab
