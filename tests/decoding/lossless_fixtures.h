// Shared set-up of the losslessness tests: the peer models, bench prompts, and the strategy configurations
// every test runs over (one place to add a strategy to all of them).
#pragma once

#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/text/tokenizer.h"
#include "strategies/registry.h"
#include "test_paths.h"

namespace draftlab::testing {

struct StrategyConfig {
  std::string label;  // test name suffix
  std::string name;   // registry name
  std::vector<std::string> options;
};

// gtest prints parameters in test names and failures: the label, not raw bytes.
inline void PrintTo(const StrategyConfig& c, std::ostream* os) { *os << c.label; }

// Every strategy, with settings that exercise different behaviour: drafts that are mostly rejected (random
// EAGLE heads, a different draft LM), drafts that are always accepted (the target as its own draft LM), model-free
// drafts, chains, static and dynamic trees, and the EAGLE-2 ablation switches.
inline std::vector<StrategyConfig> all_strategy_configs(const std::string& target_path,
                                                        const std::string& other_model_path) {
  return {
      {"vanilla", "vanilla", {}},
      {"pld", "pld", {}},
      {"chain_other_draft", "chain", {"draft=" + other_model_path, "gamma=4"}},
      {"chain_self_draft", "chain", {"draft=" + target_path, "gamma=6"}},
      {"eagle_chain", "eagle-chain", {"depth=5"}},
      {"static_tree", "static-tree", {}},
      {"eagle2", "eagle2", {}},
      {"eagle2_small", "eagle2", {"total_tokens=12", "depth=4", "top_k=3"}},
      {"eagle2_ablations", "eagle2", {"rank_by=confidence", "rerank=false", "top_k=4", "depth=3"}},
      {"eagle2_auto", "eagle2", {"total_tokens=auto", "max_auto_tokens=32"}},
  };
}

// The first turn of every k-th question of the six bench sets, encoded with BOS and cut to max_tokens.
inline std::vector<std::vector<int64_t>> bench_prompts(const Tokenizer& tok, int every_kth, size_t max_tokens) {
  std::vector<std::vector<int64_t>> prompts;
  for (const char* set : {"mt_bench", "humaneval", "gsm8k", "alpaca", "sum", "qa"}) {
    std::ifstream in(shared_path(std::string("data/bench/") + set + "/question.jsonl"));
    std::string line;
    for (int i = 0; std::getline(in, line); ++i) {
      if (i % every_kth != 0) continue;
      auto q = nlohmann::json::parse(line);
      std::vector<int64_t> ids;
      for (int32_t id : tok.encode(q["turns"][0].get<std::string>(), true)) ids.push_back(id);
      if (ids.size() > max_tokens) ids.resize(max_tokens);
      prompts.push_back(ids);
    }
  }
  return prompts;
}

}  // namespace draftlab::testing
