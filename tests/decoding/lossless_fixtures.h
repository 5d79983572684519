// Shared set-up of the losslessness tests: the peer models, bench prompts, and the strategy configurations
// every test runs over (one place to add a strategy to all of them).
#pragma once

#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "core/model/compute_options.h"
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
      // The head's input variants (EAGLE Figure 8) and a reduced draft vocabulary, on random heads: what the
      // drafter feeds each variant must never change the output. The last one drafts ranks beyond its 4-token
      // vocabulary (probability-0 candidates) with the unshifted variant's identical sibling rows. Reduced
      // vocabularies are small enough for the 8-token sampling target; their random ids come from head_seed,
      // chosen so that the wrong-acceptance-rule check still has power (the seed only moves that statistic).
      {"eagle_chain_unshifted", "eagle-chain", {"depth=4", "head_input=feature_unshifted_token"}},
      {"eagle2_feature_only", "eagle2", {"total_tokens=16", "depth=4", "top_k=4", "head_input=feature_only"}},
      {"eagle2_token_only", "eagle2", {"total_tokens=16", "depth=4", "top_k=4", "head_input=token_only"}},
      {"eagle_chain_draft_vocab", "eagle-chain", {"depth=4", "draft_vocab=6", "head_seed=1"}},
      {"eagle2_draft_vocab", "eagle2", {"total_tokens=16", "depth=4", "top_k=4", "draft_vocab=6"}},
      {"static_tree_draft_vocab_small", "static-tree", {"draft_vocab=4", "head_input=feature_unshifted_token", "head_seed=1"}},
  };
}

// A strategy configuration on one CPU forward path: every lossless test runs on the native path and on the
// libtorch reference path.
struct LosslessCase {
  StrategyConfig config;
  CpuPath path;
  std::string label() const { return config.label + (path == CpuPath::Native ? "_native" : "_reference"); }
  ComputeOptions compute() const {
    ComputeOptions o;
    o.cpu_path = path;
    return o;
  }
};
inline void PrintTo(const LosslessCase& c, std::ostream* os) { *os << c.label(); }

inline std::vector<LosslessCase> on_both_paths(const std::vector<StrategyConfig>& configs) {
  std::vector<LosslessCase> cases;
  for (CpuPath path : {CpuPath::Native, CpuPath::Reference})
    for (const auto& c : configs) cases.push_back({c, path});
  return cases;
}

inline std::string case_name(const ::testing::TestParamInfo<LosslessCase>& info) { return info.param.label(); }

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
