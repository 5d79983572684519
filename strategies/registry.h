// The registry: every strategy's descriptor (strategy_descriptor.h), found by name.
//
// Adding a strategy: copy strategies/vanilla.cpp to strategies/<file>.cpp, rename its descriptor function to
// <file>_strategy(), fill in the descriptor, and add X(<file>) to the list below. It then appears in --help,
// `draftlab strategies` (README's table), the lossless tests, `compare -s` and `exp`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strategies/strategy_descriptor.h"

// Every strategy, one line each, in the order of --help, README's table and `exp speed`'s methods.
#define DRAFTLAB_STRATEGIES(X) \
  X(vanilla)                   \
  X(chain_draft)               \
  X(prompt_lookup)             \
  X(lookahead)                 \
  X(static_tree)               \
  X(eagle_chain)               \
  X(medusa)                    \
  X(hydra)                     \
  X(eagle2)                    \
  X(eagle3)

namespace draftlab {

#define DRAFTLAB_DECLARE_STRATEGY(file) const StrategyDescriptor& file##_strategy();
DRAFTLAB_STRATEGIES(DRAFTLAB_DECLARE_STRATEGY)
#undef DRAFTLAB_DECLARE_STRATEGY

const std::vector<const StrategyDescriptor*>& strategy_table();

// Throws Error for an unknown name, listing the known ones.
const StrategyDescriptor& find_strategy(const std::string& name);

// Strategies registered while the program runs (Python's draftlab.register_strategy): found by find_strategy and
// so usable by name in generate, compare and exp, but never listed by strategy_table() (README's table and the
// lossless tests list the built-in ones). register_strategy throws Error when the name is taken;
// unregister_strategy drops one (no-op for an unknown name) and must not run while it decodes.
void register_strategy(StrategyDescriptor descriptor);
void unregister_strategy(const std::string& name);

// The strategy every speedup is measured against: the one that drafts nothing (DraftShape::None).
const StrategyDescriptor& baseline_strategy();

// Checks the given options against the descriptor's table (unknown keys, types, ranges, required keys) and adds
// the defaults. Throws Error naming the strategy, the option and what it expects.
StrategyOptions resolve_options(const StrategyDescriptor& strategy, const StrategyOptions& given);

// find_strategy + resolve_options + the descriptor's factory.
std::unique_ptr<DraftStrategy> make_strategy(const std::string& name, const StrategyContext& context,
                                             const StrategyOptions& options);

// "NAME" or "NAME:key=value,key=value" (as -s / --strategy take): the name and the items. Throws Error naming
// `flag` for an item without '='.
struct StrategySpec {
  std::string name;
  std::vector<std::pair<std::string, std::string>> options;  // in the order given
};
StrategySpec parse_strategy_spec(const std::string& text, const std::string& flag);

// For --help: one paragraph per strategy with its options, defaults and ranges.
std::string strategies_help();
// README's strategies table (markdown), checked against README by a test.
std::string strategies_markdown();

}  // namespace draftlab
