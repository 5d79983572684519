// The registry: every draft family, one line each. A family is one folder, strategies/<name>/, holding its code
// (head, checkpoint reading and writing, trainer, options, strategies) and its descriptor <name>_family(): the
// strategies it drafts with (strategy_descriptor.h) and, for trainable heads, its HeadFamily (head_family.h).
//
// Adding a family: a folder strategies/<name>/ whose <name>_family() lists its strategies (start from
// strategies/vanilla/vanilla.cpp), and X(<name>) below. Its strategies then appear in --help, `draftlab strategies`
// (README's table), the lossless tests, `compare -s` and `exp`; its heads in train-head --kind and the drivers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strategies/head_family.h"
#include "strategies/strategy_descriptor.h"

// Every family, in the order of --help, README's table and `exp speed`'s methods.
#define DRAFTLAB_FAMILIES(X) \
  X(vanilla)                 \
  X(chain)                   \
  X(pard)                    \
  X(pld)                     \
  X(suffix)                  \
  X(lookahead)               \
  X(eagle)                   \
  X(medusa)                  \
  X(hydra)                   \
  X(eagle3)                  \
  X(peagle)                  \
  X(dflash)

namespace draftlab {

struct DraftFamily {
  std::string name;                                   // its folder under strategies/
  std::vector<const StrategyDescriptor*> strategies;  // what it drafts with, in table order
  const HeadFamily* heads = nullptr;                  // its trainable draft heads, if it has any
};

#define DRAFTLAB_DECLARE_FAMILY(name) const DraftFamily& name##_family();
DRAFTLAB_FAMILIES(DRAFTLAB_DECLARE_FAMILY)
#undef DRAFTLAB_DECLARE_FAMILY

const std::vector<const DraftFamily*>& draft_family_table();

// Every family's strategies, in registry order.
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
