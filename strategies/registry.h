// Builds strategies by name. Adding a strategy: write strategies/<name>.cpp with a factory function and add one
// entry to the table in registry.cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/decoding/draft_strategy.h"
#include "core/model/llama_model.h"
#include "strategies/strategy_options.h"

namespace draftlab {

// What a strategy may need besides its options.
struct StrategyContext {
  const LlamaModel& target;  // for its config, embedding and LM head (EAGLE) and compute options
};

using StrategyFactory = std::function<std::unique_ptr<DraftStrategy>(const StrategyContext&, const StrategyOptions&)>;

struct StrategyInfo {
  std::string name;
  std::string summary;  // one line, with its options and defaults, for --help
  StrategyFactory make;
};

const std::vector<StrategyInfo>& strategy_table();

// Throws Error for an unknown name (listing the known ones) or an option the strategy did not read.
std::unique_ptr<DraftStrategy> make_strategy(const std::string& name, const StrategyContext& context,
                                             const StrategyOptions& options);

}  // namespace draftlab
