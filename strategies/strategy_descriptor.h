// StrategyDescriptor - everything the framework knows about a draft strategy, declared once, next to its code:
// its name, what it needs, what its drafts look like, its typed option table and the configurations the lossless
// tests run it in. The registry, `--help`, option validation, README's strategies table, the lossless tests and
// the experiment drivers all read it; nothing outside strategies/ names a strategy.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/decoding/draft_strategy.h"
#include "core/model/llama_model.h"
#include "strategies/option_spec.h"
#include "strategies/strategy_options.h"

namespace draftlab {

// What a strategy may need besides its options.
struct StrategyContext {
  const LlamaModel& target;  // for its config, embedding and LM head (EAGLE) and compute options
};

// What a strategy loads besides the target. Drivers fill the matching option (head=, draft=) from --head / --draft.
enum class StrategyNeeds {
  Nothing,     // model-free, or the target alone
  Head,        // draft heads of the target (head_family says which): option head=PATH (absent: random ones, for tests)
  DraftModel,  // a small Llama sharing the target's vocabulary: option draft=PATH (--draft)
  ParallelDraftModel,  // such a Llama trained to draft k tokens in one forward: option draft=PATH (--parallel-draft)
};

// The shape of its drafts, which tables and figures group by.
enum class DraftShape {
  None,         // no drafting: the baseline every speedup divides by
  Chain,        // one path per cycle
  StaticTree,   // the same tree positions every cycle (per-position acceptance is meaningful)
  DynamicTree,  // a tree grown per cycle
};


// A configuration the lossless tests run the strategy in. In option values, {target} stands for the test's target
// model folder and {other_model} for another model with the target's vocabulary.
//
// T > 0 power: a planted wrong acceptance rule (sampling from p after a rejection) must make the variant's first two
// tokens fail the chi-square test (tests/decoding/test_lossless_sampling.cpp), at control_temperature. A variant
// whose drafts are never rejected says why (never_rejected; the tests then check that none is); one where no control
// can see the wrong rule says why (no_power), and its strategy must have another variant with power
// (tests/decoding/test_strategy_registry.cpp).
struct TestVariant {
  std::string label;  // unique over all strategies: the test name suffix
  std::vector<std::string> options;
  // Why no wrong-rule control has power in this variant; empty: the two-token control must catch the wrong rule.
  std::string no_power = {};
  // Why this variant may rightly draft nothing on the greedy tests' peer models; empty: it must draft there.
  std::string may_draft_nothing = {};
  // Its trees depend on measured wall-clock time, so two runs (a batch and a sequence alone) may draft differently:
  // same tokens at T = 0, but not the same cycles, nor the same random stream at T > 0.
  bool timing_dependent = false;
  // Why its drafts are never rejected at T > 0 (q = p): there is no residual to get wrong.
  std::string never_rejected = {};
  // The wrong-rule control's temperature. Hotter than the lossless test's 1.5 where a random draft is almost never
  // accepted at 1.5: a flatter p accepts more, and the bias of sampling p after a rejection, min(p, q) - beta p,
  // grows with the accepted mass.
  double control_temperature = 1.5;
};

// v with the wrong-rule control at temperature t.
inline TestVariant with_control_temperature(TestVariant v, double t) {
  v.control_temperature = t;
  return v;
}
// v, whose drafts the verifier never rejects at T > 0, for the reason given.
inline TestVariant never_rejected(TestVariant v, std::string why) {
  v.never_rejected = std::move(why);
  return v;
}

using StrategyFactory = std::function<std::unique_ptr<DraftStrategy>(const StrategyContext&, const StrategyOptions&)>;

struct StrategyDescriptor {
  std::string name;     // what --strategy / -s take
  std::string summary;  // one line: what it does
  StrategyNeeds needs = StrategyNeeds::Nothing;
  // For StrategyNeeds::Head: the family of head it loads (HeadFamily::name), so drivers hand it the --head of
  // that family.
  std::string head_family;
  DraftShape shape = DraftShape::Chain;
  // Whether its drafted nodes carry a draft probability (calibration figures); model-free drafts have none and
  // record NaN in results files.
  bool has_confidence = true;
  std::vector<OptionSpec> options;
  std::vector<TestVariant> test_variants;
  // Where the defaults are sized for a CPU and differ from the method's own paper: the paper's option set, which
  // `exp speed` (EAGLE-2 Table 1) runs beside the default, labelled "<name> (<paper_setting_label>)".
  std::vector<std::pair<std::string, std::string>> paper_setting;
  std::string paper_setting_label;
  // Rules across options (optional): throws Error naming them. resolve_options runs it, before any model loads.
  std::function<void(const StrategyOptions&)> check_options;
  // Builds it from validated options: every declared key reads its given value or default.
  StrategyFactory make;

  const OptionSpec* option(const std::string& key) const;
};

const char* needs_name(StrategyNeeds needs);  // "nothing", "EAGLE head", "draft model"
// What this strategy needs, for tables: needs_name, with the head family's title for StrategyNeeds::Head.
std::string needs_label(const StrategyDescriptor& strategy);
const char* shape_name(DraftShape shape);     // "none", "chain", "static_tree", "dynamic_tree" (results files)
// The option drivers fill from --head / --draft ("head", "draft"); "" for Nothing.
const char* needs_option(StrategyNeeds needs);

}  // namespace draftlab
