#include "strategies/registry.h"

#include "core/base/error.h"
#include "strategies/chain_draft.h"
#include "strategies/eagle2.h"
#include "strategies/eagle_chain.h"
#include "strategies/prompt_lookup.h"
#include "strategies/static_tree.h"
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
      {"eagle-chain", "EAGLE head, chain draft: depth=5 head=PATH (absent: random head, head_seed=0)",
       make_eagle_chain_strategy},
      {"static-tree", "EAGLE-1 static tree filled by an EAGLE head: tree=data/trees/mc_sim_7b_63.json (or a name "
                      "under data/trees) head=PATH head_seed=0",
       make_static_tree_strategy},
      {"eagle2", "EAGLE-2 dynamic tree: total_tokens=60 (verified per cycle, root included; or auto, chosen per "
                 "cycle from the measured verify cost and observed acceptance, max_auto_tokens=128) depth=6 top_k=10 "
                 "rank_by=value|confidence rerank=true head=PATH head_seed=0",
       make_eagle2_strategy},
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
