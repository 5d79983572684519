// Shared set-up of the losslessness tests: the peer models, bench prompts, and the strategy configurations
// every test runs over (one place to add a strategy to all of them).
#pragma once

#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "core/decoding/speculative_decoder.h"
#include <optional>

#include "core/model/compute_options.h"
#include "core/text/tokenizer.h"
#include "strategies/registry.h"
#include "test_paths.h"

namespace draftlab::testing {

struct StrategyConfig {
  std::string label;  // test name suffix
  std::string name;   // registry name
  std::vector<std::string> options;
  std::string no_power;           // TestVariant::no_power
  std::string may_draft_nothing;  // TestVariant::may_draft_nothing
  bool timing_dependent = false;  // TestVariant::timing_dependent
  std::string never_rejected;     // TestVariant::never_rejected
  double control_temperature = 1.5;  // TestVariant::control_temperature
};

// gtest prints parameters in test names and failures: the label, not raw bytes.
inline void PrintTo(const StrategyConfig& c, std::ostream* os) { *os << c.label; }

// Every strategy in the registry, in each configuration its descriptor declares (test_variants: drafts that are
// mostly rejected, always accepted, model-free, chains, static and dynamic trees, ablation switches, head
// variants), with {target} and {other_model} in option values replaced by the given model folders.
inline std::vector<StrategyConfig> all_strategy_configs(const std::string& target_path,
                                                        const std::string& other_model_path) {
  auto fill = [&](std::string v) {
    for (const auto& [key, path] : {std::pair<std::string, std::string>{"{target}", target_path},
                                    std::pair<std::string, std::string>{"{other_model}", other_model_path}})
      for (size_t at = v.find(key); at != std::string::npos; at = v.find(key)) v.replace(at, key.size(), path);
    return v;
  };
  std::vector<StrategyConfig> configs;
  for (const StrategyDescriptor* s : strategy_table())
    for (const TestVariant& v : s->test_variants) {
      StrategyConfig c{v.label,          s->name,          {}, v.no_power, v.may_draft_nothing, v.timing_dependent,
                       v.never_rejected, v.control_temperature};
      for (const auto& o : v.options) c.options.push_back(fill(o));
      configs.push_back(c);
    }
  return configs;
}

// A strategy configuration on one CPU forward path: every lossless test runs on the native path and on the
// libtorch reference path; the greedy ones also on the native path with a float16 KV cache.
struct LosslessCase {
  StrategyConfig config;
  CpuPath path;
  bool float16_kv_cache = false;
  bool mixture_of_experts = false;  // a mixture-of-experts target (tests that build their own target)
  // Quantized weights (q8_0, or `weights` when it names q4_0) met by int8 dot products (BlockDot::Int8): the
  // target's own arithmetic, not the float model's.
  bool int8_dot = false;
  // How the native path stores the target's weights (float16, bfloat16, q4_0); unset: as the checkpoint stores them.
  std::optional<WeightStorage> weights = std::nullopt;
  at::ScalarType dtype = at::kFloat;  // the compute dtype (bfloat16: the reference path in bfloat16 throughout)
  std::string label() const {
    return config.label + (path == CpuPath::Native ? "_native" : "_reference") + (float16_kv_cache ? "_kv16" : "") +
           (mixture_of_experts ? "_moe" : "") +
           (int8_dot ? (weights == WeightStorage::Q4_0 ? "_q4int8" : "_q8int8")
                     : weights ? std::string("_") + weight_storage_name(*weights) : "") +
           (dtype == at::kBFloat16 ? "_bf16compute" : "");
  }
  ComputeOptions compute() const {
    ComputeOptions o;
    o.cpu_path = path;
    o.dtype = dtype;
    if (weights) o.weights = *weights;
    if (float16_kv_cache) o.kv_cache = at::kHalf;
    if (int8_dot) {
      o.weights = weights.value_or(WeightStorage::Q8_0);
      o.block_dot = BlockDot::Int8;
    }
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

// Both paths, and the native path over a float16 KV cache (vanilla runs with the same cache: the claim is that
// a strategy reproduces the target's own decoding in that configuration).
inline std::vector<LosslessCase> on_every_path(const std::vector<StrategyConfig>& configs) {
  std::vector<LosslessCase> cases = on_both_paths(configs);
  for (const auto& c : configs) cases.push_back({c, CpuPath::Native, true});
  return cases;
}

// The native path over a mixture-of-experts target.
inline std::vector<LosslessCase> on_moe_target(const std::vector<StrategyConfig>& configs) {
  std::vector<LosslessCase> cases;
  for (const auto& c : configs) cases.push_back({c, CpuPath::Native, false, true});
  return cases;
}

// The native path over q8_0 (or q4_0) weights with int8 dot products (dense target, and mixture of experts when
// `moe`).
inline std::vector<LosslessCase> on_int8_target(const std::vector<StrategyConfig>& configs, bool moe = false,
                                                WeightStorage storage = WeightStorage::Q8_0) {
  std::vector<LosslessCase> cases;
  for (const auto& c : configs) cases.push_back({c, CpuPath::Native, false, moe, true, storage});
  return cases;
}

// The native path with the target's weights stored as float16 and as bfloat16 (each product still sums in float32),
// and the reference path computing in bfloat16: the strategy must reproduce the target's decoding in that setting.
inline std::vector<LosslessCase> on_half_weights(const std::vector<StrategyConfig>& configs) {
  std::vector<LosslessCase> cases;
  for (WeightStorage w : {WeightStorage::Float16, WeightStorage::BFloat16})
    for (const auto& c : configs) cases.push_back({c, CpuPath::Native, false, false, false, w});
  for (const auto& c : configs)
    cases.push_back({c, CpuPath::Reference, false, false, false, std::nullopt, at::kBFloat16});
  return cases;
}

inline std::string case_name(const ::testing::TestParamInfo<LosslessCase>& info) { return info.param.label(); }

// Tokens the cycles accepted beyond those emitted (1 + accepted each, the first token from the prefill): >= 2 when
// the output stopped at an accepted draft node rather than at the verifier's own token.
inline int64_t accepted_beyond_emitted(const SpeculativeResult& r) {
  int64_t produced = 1;
  for (const auto& c : r.cycles) produced += c.accepted + 1;
  return produced - static_cast<int64_t>(r.tokens.size());
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
