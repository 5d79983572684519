#include "strategies/registry.h"

#include "core/base/error.h"
#include "strategies/chain_draft.h"
#include "strategies/prompt_lookup.h"
#include "strategies/vanilla.h"

namespace draftlab {

const std::vector<StrategyInfo>& strategy_table() {
  static const std::vector<StrategyInfo> table = {
      {"vanilla", "no draft: plain decoding through the speculative loop (the baseline)", make_vanilla_strategy},
      {"chain", "classic speculative sampling with a small draft model: draft=PATH (required), gamma=4",
       make_chain_strategy},
      {"pld", "prompt lookup, no model: copy what followed the last n-gram's latest occurrence: "
              "max_ngram=3 min_ngram=1 num_tokens=10",
       make_prompt_lookup_strategy},
  };
  return table;
}

std::unique_ptr<DraftStrategy> make_strategy(const std::string& name, const StrategyContext& context,
                                             const StrategyOptions& options) {
  std::string known;
  for (const auto& info : strategy_table()) {
    if (info.name == name) {
      auto strategy = info.make(context, options);
      auto unused = options.unused();
      if (!unused.empty())
        throw Error("strategy " + name + ": unknown option '" + unused.front() + "' (options: " + info.summary + ")");
      return strategy;
    }
    known += (known.empty() ? "" : ", ") + info.name;
  }
  throw Error("--strategy: expected one of " + known + ", got '" + name + "'");
}

}  // namespace draftlab
