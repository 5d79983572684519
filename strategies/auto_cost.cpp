#include "strategies/auto_cost.h"

#include <cstdio>

#include "core/base/error.h"

namespace draftlab {

std::optional<FixedCosts> parse_auto_cost(const std::string& strategy, const std::string& text) {
  if (text == "measured") return std::nullopt;
  double f = 0, per = 0, draft = 0;
  char s1 = 0, s2 = 0, rest = 0;
  if (std::sscanf(text.c_str(), "%lf%c%lf%c%lf%c", &f, &s1, &per, &s2, &draft, &rest) != 5 || s1 != '/' ||
      s2 != '/' || !(f >= 0 && per >= 0 && draft >= 0 && f + per > 0))
    throw Error("strategy " + strategy + ": auto_cost=" + text +
                ": expected \"measured\" or F/P/D, three non-negative milliseconds (e.g. 1/0.002/0.1)");
  return FixedCosts{VerifyCost({{1, (f + per) * 1e-3}, {2, (f + 2 * per) * 1e-3}}), draft * 1e-3};
}

OptionSpec auto_cost_option(const std::string& budget, const std::string& draft_unit) {
  return text_option("auto_cost", "measured",
                     budget + "=auto: measured, or F/P/D in ms: verifying n tokens costs F + P n, drafting D per " +
                         draft_unit + " (fixed: drafts independent of the machine's speed)");
}

bool automatic_budget(const std::string& strategy, const StrategyOptions& options, const std::string& budget) {
  return !automatic_budget(strategy, options, std::vector<std::string>{budget}).empty();
}

std::string automatic_budget(const std::string& strategy, const StrategyOptions& options,
                             const std::vector<std::string>& budgets) {
  std::string automatic, names;
  for (const std::string& b : budgets) {
    names += (names.empty() ? "" : " or ") + b + "=auto";
    if (options.get_string(b) != "auto") continue;
    if (!automatic.empty())
      throw Error("strategy " + strategy + ": " + automatic + "=auto and " + b + "=auto: expected one automatic budget");
    automatic = b;
  }
  if (automatic.empty() && options.given("auto_cost"))
    throw Error("strategy " + strategy + ": auto_cost applies to " + names + " only");
  if (!automatic.empty()) parse_auto_cost(strategy, options.get_string("auto_cost"));
  return automatic;
}

}  // namespace draftlab
