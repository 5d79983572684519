// The one measurement loop behind every `draftlab exp` driver: methods (strategy configurations) x the questions of
// one dataset at one temperature, recorded as runs of a results file (docs/results-schema.md).
//
// Per question turn: every method's `warmup` untimed generations, then `repeats` timed ones with the methods
// interleaved (machine drift hits all alike); the turn's wall time is the median, its cycles and nodes those of the
// last repeat. At T = 0 every method's tokens are compared with the baseline's (methods[0]) on the fly. Later turns
// of a multi-turn question (MT-bench) see the earlier turns and the method's own answers through the chat
// template. Prompts longer than max_prompt_tokens are cut from the left (their end is what the answer continues).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/model/llama_model.h"
#include "core/model/sampler.h"
#include "core/text/tokenizer.h"
#include "experiments/drivers/bench_questions.h"
#include "core/results/results_file.h"
#include "strategies/strategy_descriptor.h"

namespace draftlab {

struct MethodSpec {
  std::string label;     // shown in tables: "eagle2 w/o value"
  std::string strategy;  // registry name (strategies/registry.h)
  std::vector<std::pair<std::string, std::string>> options;  // in the order given
  std::string grid_json;  // sweeps: the grid point; empty otherwise
  // Filled by plan_method, once, before any model loads: the strategy's descriptor and the options resolved against
  // its table (defaults applied, every value and rule checked). run_methods makes the strategies from them.
  const StrategyDescriptor* descriptor = nullptr;
  StrategyOptions resolved;

  std::string option(const std::string& key) const;  // "" when absent
  void set_option(const std::string& key, const std::string& value);
  std::string options_json() const;  // {"key": "value", ...}
};

// Looks the method's strategy up and resolves its options (Error naming the strategy and option). Call again after
// changing the options.
void plan_method(MethodSpec& method);

// "NAME" or "NAME:key=value,..." as -s / --strategy take it; the item label=TEXT names the method in tables
// (default: the text itself). Throws Error naming `flag` for a malformed item.
MethodSpec parse_method_spec(const std::string& text, const std::string& flag);

struct RunnerSettings {
  int64_t max_new_tokens = 64;
  int64_t max_prompt_tokens = 0;  // 0: the context less max_new_tokens
  int warmup = 1;
  int repeats = 3;
  uint64_t seed = 0;  // question turn r of a dataset samples with seed + r, the same for every method and repeat
  SamplingParams filters;  // top_k, top_p, their order; the temperature comes from each run
  std::string chat_template = "plain";
  std::string shard = "0/1";  // recorded on every run
  // Generate max_new_tokens on every question even past an end-of-sequence token (as serving benchmarks'
  // ignore_eos does): a story model asked a chat question often ends at once, leaving nothing to measure.
  bool ignore_eos = false;
  // Questions decoded together (speculative_decoder.h): consecutive questions in groups of this many, turn by turn, one
  // target forward per cycle for the group. A turn's wall_seconds is its share of its batch's (by new tokens).
  int64_t batch_size = 1;
  // T = 0: after the timed repeats of each question turn, every method but the baseline decodes it once more,
  // untimed, committing one token per cycle, and records each position's matched length (the oracle table).
  bool oracle = false;
};

// Called after each question turn with a short progress line.
using ProgressCallback = std::function<void(const std::string& line)>;

// Runs every method over the questions; methods[0] must be the baseline (strategies/registry.h), each method planned
// (plan_method). Returns one RunRecord per method, in order. Throws Error for a method not planned, or when
// max_new_tokens leaves no room for a prompt.
std::vector<RunRecord> run_methods(const LlamaModel& target, const Tokenizer& tokenizer,
                                   const std::vector<MethodSpec>& methods, const std::string& dataset,
                                   const std::vector<BenchQuestion>& questions, double temperature,
                                   const RunnerSettings& settings, const ProgressCallback& progress = {});

}  // namespace draftlab
