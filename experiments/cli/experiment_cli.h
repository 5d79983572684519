// What `draftlab exp` and `draftlab compare` share once their options are parsed: the run's identity (model, dtype,
// device, command line) recorded in the config, the methods checked before the model loads, the model loaded and
// the experiment run with a progress line on a terminal.
#pragma once

#include <boost/program_options.hpp>

#include "experiments/cli/model_loading.h"
#include "experiments/drivers/drivers.h"

namespace draftlab::cli {

// Progress on stderr: on a terminal one line redrawn in place; otherwise (a log file, Slurm, nohup) a plain line
// every `every_seconds` with question turns done / total, rate and ETA. quiet (also when $CI is set) prints none.
struct ProgressSettings {
  double every_seconds = 30;
  bool quiet = false;
};

struct ExperimentRun {
  LoadedModel loaded;
  ResultsFile results;
};

ExperimentRun run_experiment_from_cli(ExperimentConfig& config, const ModelOptions& model, int argc, char** argv,
                                      const ProgressSettings& progress);

// Adds --progress-every and --quiet to a command's options.
void add_progress_options(boost::program_options::options_description& desc, ProgressSettings& progress);

}  // namespace draftlab::cli
