// The `draftlab exp NAME` drivers: each is a preset of methods and settings over the one runner
// (method_runner.h), reproducing a table or figure of the EAGLE / EAGLE-2 papers on our models:
//   speed          EAGLE-2 Table 1: vanilla, chain (with --draft), pld, static-tree, eagle-chain, eagle2; six sets, T 0/1
//   alpha          EAGLE Table 2: eagle-chain chain drafts (depth 5): tau and n-alpha
//   calibration    EAGLE-2 Figure 6: eagle2 nodes' confidence vs acceptance
//   positions      EAGLE-2 Figure 5: acceptance per static-tree position
//   ablate-eagle2  EAGLE-2 Table 3: eagle2 w/o value, w/o reranking, w/o both
//   ablate-inputs  EAGLE Figure 8: one head per input variant (--head LABEL=DIR, repeated)
//   tree-vs-chain  EAGLE Table 5: static tree vs chain, same head
//   train-data     EAGLE Table 6: heads trained on fixed vs target-generated data (--head fixed=DIR --head generated=DIR)
//   sweep          total_tokens x depth x top_k grid of eagle2, shardable (--shard i/n)
#pragma once

#include <cstdint>
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

struct ExperimentConfig {
  std::string experiment;      // driver name
  std::string target_path;     // recorded with its checksum
  std::string dtype = "float32", device = "cpu";
  std::vector<HeadSpec> heads;  // --head [LABEL=]DIR
  std::string draft_path;       // --draft (speed: the classic chain method)
  std::vector<std::string> datasets;  // empty: the driver's default
  int questions = 0;                  // per dataset; 0 = all
  std::vector<double> temperatures;   // empty: the driver's default
  RunnerSettings runner;
  std::vector<std::string> strategy_specs;  // --strategy NAME:k=v,... (add, or override a preset method of that label)
  std::string head_strategy = "eagle2";     // ablate-inputs, train-data: the strategy each head drives
  // sweep
  std::vector<int64_t> grid_total_tokens{20, 40, 60}, grid_depth{4, 6}, grid_top_k{4, 8};
  int shard_index = 0, shard_count = 1;
  std::string command_line;
};

// The driver names, in the order of the help text.
const std::vector<std::string>& experiment_names();

// Parses "[LABEL=]DIR" of --head.
HeadSpec parse_head_spec(const std::string& text);

// Parses "i/n" of --shard (0 <= i < n). Throws Error naming --shard.
void parse_shard(const std::string& text, int& index, int& count);

// Fills the driver's defaults (datasets, temperatures) where the config leaves them empty. Throws Error for an
// unknown driver name.
void apply_driver_defaults(ExperimentConfig& config);

// The methods of the driver (vanilla first), after --strategy additions/overrides. Throws Error naming the missing
// option (--head, labelled heads) or a malformed --strategy.
std::vector<MethodSpec> experiment_methods(const ExperimentConfig& config);

// Runs the whole experiment: every dataset x temperature through run_methods, with the root attributes of the
// schema (environment, models and checksums, settings) and the heads' training logs under /training.
ResultsFile run_experiment(const LlamaModel& target, const Tokenizer& tokenizer, const ExperimentConfig& config,
                           const ProgressCallback& progress = {});

// The summary printed at the end: method, dataset, T, tok/s, speedup (vs the vanilla run of the same dataset,
// temperature and shard), tau, identical (k/n at T = 0). Sweeps mark the fastest grid point per dataset and T.
std::string summary_table(const ResultsFile& results);

// The checksum recorded for a model: its weights file (model.safetensors, else the single .bin / .safetensors /
// .gguf in the folder, or the path itself when it is a file). "none" when there is no such file.
std::string model_weights_sha256(const std::string& path);

}  // namespace draftlab
