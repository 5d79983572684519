// The `draftlab exp NAME` drivers: each is a row of experiment_table() (name, the paper item it reproduces,
// default datasets and temperatures, and the methods it runs) over the one measurement loop (method_runner.h).
// `draftlab compare` is the row "compare": the methods given with -s, on prompts or bench sets.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/model/llama_model.h"
#include "core/text/tokenizer.h"
#include "experiments/drivers/method_runner.h"
#include "core/results/results_file.h"

namespace draftlab {

struct HeadSpec {
  std::string label;  // "" for a plain --head DIR
  std::string path;
};

// One axis of `exp sweep`: an eagle2 option and its values, kept as the option table reads them ("20", "auto").
struct GridAxis {
  std::string option;
  std::vector<std::string> values;
};

// The axis of `flag` ("--total-tokens", "--grid"): OPTION and its comma-separated VALUES, each value checked against
// eagle2's option table now, before any model loads. Throws Error naming the flag, option and value.
GridAxis parse_grid_axis(const std::string& flag, const std::string& option, const std::string& values);
// A grid value as the results file's `grid` attribute holds it: a number when the option read it as one.
nlohmann::ordered_json grid_value(const std::string& text);
// Sets (or adds, after the others) the axis of its option.
void set_grid_axis(std::vector<GridAxis>& grid, GridAxis axis);

struct ExperimentConfig {
  std::string experiment;      // driver name
  std::string target_path;     // recorded with its checksum
  std::string dtype = "float32", device = "cpu";
  std::vector<HeadSpec> heads;  // --head [LABEL=]DIR
  std::string draft_path;       // --draft (speed: the classic chain method)
  std::string parallel_draft_path;  // --parallel-draft (pard)
  std::vector<std::string> datasets;  // empty: the driver's default
  std::vector<std::string> prompts;   // compare: prompt texts, run as the dataset "prompts" (first)
  int questions = 0;                  // per dataset; 0 = all
  std::vector<double> temperatures;   // empty: the driver's default
  std::vector<int64_t> batch_sizes;   // empty: the driver's default; runner.batch_size is set from each in turn
  RunnerSettings runner;
  std::vector<std::string> strategy_specs;  // --strategy NAME:k=v,... (add, or override a preset method of that label)
  std::string head_strategy;  // the labelled-head drivers: the strategy each head drives ("": its family's eagle2 / eagle3)
  // sweep: the grid's axes in loop order (the last varies fastest), each an eagle2 option with its values
  std::vector<GridAxis> grid{{"total_tokens", {"20", "40", "60"}}, {"depth", {"4", "6"}}, {"top_k", {"4", "8"}}};
  int shard_index = 0, shard_count = 1;
  std::string command_line;
};

// One experiment's driver: which methods it runs (what it reproduces: the experiment catalog,
// analysis/experiment_catalog.h, under the same name).
struct ExperimentDescriptor {
  std::string name;
  std::string summary;     // one line for --help: what it measures
  std::vector<std::string> datasets;   // defaults
  std::vector<double> temperatures;
  // The methods after the baseline; throws Error naming what the config lacks (--head, labelled heads).
  std::function<std::vector<MethodSpec>(const ExperimentConfig&)> methods;
  std::vector<int64_t> batch_sizes{1};  // default: each method runs at each (speculative_decoder.h)
};

const std::vector<ExperimentDescriptor>& experiment_table();
// Throws Error for an unknown name, listing the known ones.
const ExperimentDescriptor& find_experiment(const std::string& name);
// The driver names, in the catalog's order.
std::vector<std::string> experiment_names();
// "  NAME  PAPER ITEM: SUMMARY" lines for --help.
std::string experiments_help();

// Parses "[LABEL=]DIR" of --head.
HeadSpec parse_head_spec(const std::string& text);

// Parses "i/n" of --shard (0 <= i < n). Throws Error naming --shard.
void parse_shard(const std::string& text, int& index, int& count);

// Fills the driver's defaults (datasets, temperatures, batch sizes) where the config leaves them empty. Throws Error for an
// unknown driver name.
void apply_driver_defaults(ExperimentConfig& config);

// The methods of the driver (the baseline first), after --strategy additions/overrides. Throws Error naming the missing
// option (--head, labelled heads) or a malformed --strategy.
std::vector<MethodSpec> experiment_methods(const ExperimentConfig& config);

// How far an experiment is: question turns done of the whole run (every dataset, temperature and turn), and the
// runner's line about the last one.
struct ExperimentProgress {
  int64_t done = 0, total = 0;
  std::string line;
};
using ExperimentProgressCallback = std::function<void(const ExperimentProgress&)>;

// An experiment resolved before any model loads: the config with the driver's defaults applied, and its methods
// (the baseline first), each planned (plan_method: descriptor and resolved options).
struct ExperimentPlan {
  ExperimentConfig config;
  std::vector<MethodSpec> methods;
};
// apply_driver_defaults + experiment_methods: throws Error for anything wrong with the config or a method's options.
ExperimentPlan plan_experiment(const ExperimentConfig& config);

// Runs the whole experiment: every dataset x temperature x batch size through run_methods, with the root attributes of the
// schema (environment, models and checksums, settings) and the heads' training logs under /training.
ResultsFile run_experiment(const LlamaModel& target, const Tokenizer& tokenizer, const ExperimentPlan& plan,
                           const ExperimentProgressCallback& progress = {});

// The summary `exp` and `compare` print: one row per run with method, dataset, T, tok/s, speedup and tau
// (analysis/run_metrics.h), drafted nodes per cycle, the draft / verify time split and identical (k/n at T = 0).
// Sweeps mark the fastest grid point per dataset and T.
struct SummaryRow {
  std::string method, dataset;
  double temperature = 0, tokens_per_second = 0, speedup = 0, tau = 0, drafted_per_cycle = 0;
  int64_t batch_size = 1;
  double draft_share = 0, verify_share = 0;  // of draft + verify time
  int64_t identical = 0, checked = 0;        // question turns equal to the baseline's, of those compared
  bool best = false;
};
std::vector<SummaryRow> summary_rows(const ResultsFile& results);
std::string summary_table(const ResultsFile& results);
// Whether every greedy question turn equals the baseline's (nothing compared counts as true).
bool all_identical(const ResultsFile& results);

// The checksum recorded for a model: its weights file (model.safetensors, else the single .bin / .safetensors /
// .gguf in the folder, or the path itself when it is a file). "none" when there is no such file.
std::string model_weights_sha256(const std::string& path);

}  // namespace draftlab
