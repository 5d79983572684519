// What `draftlab exp` and `draftlab compare` share once their options are parsed: the run's identity (model, dtype,
// device, command line) recorded in the config, the methods checked before the model loads, the model loaded and
// the experiment run with a progress line on a terminal.
#pragma once

#include "experiments/cli/model_loading.h"
#include "experiments/drivers/drivers.h"

namespace draftlab::cli {

struct ExperimentRun {
  LoadedModel loaded;
  ResultsFile results;
};

ExperimentRun run_experiment_from_cli(ExperimentConfig& config, const ModelOptions& model, int argc, char** argv);

}  // namespace draftlab::cli
