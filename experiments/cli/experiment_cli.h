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
  const LlamaModel* target = nullptr;  // the loaded model, or an InProcessModel's
  LoadedModel owned;                   // what this run loaded (empty for an InProcessModel)
  ResultsFile results;
};

// A model already loaded in this process (the Python module's draftlab.Model). While one is alive on this thread,
// compare and exp run on it instead of loading --model, and hand their results file to `results` (exp then needs
// no --out). The command's model options must be the ones the model was loaded with: Error naming the first that
// differs.
class InProcessModel {
 public:
  InProcessModel(const LoadedModel& model, const ModelOptions& loaded_with, ResultsFile& results);
  ~InProcessModel();
  InProcessModel(const InProcessModel&) = delete;
  InProcessModel& operator=(const InProcessModel&) = delete;

  static InProcessModel* current();  // nullptr when none is alive on this thread
  // The model, after checking that `asked` names it the way it was loaded.
  const LoadedModel& model_for(const ModelOptions& asked) const;
  void deliver(const ResultsFile& results) const { *results_ = results; }

 private:
  const LoadedModel& model_;
  ModelOptions loaded_with_;
  ResultsFile* results_;
  InProcessModel* previous_;
};

ExperimentRun run_experiment_from_cli(ExperimentConfig& config, const ModelOptions& model, int argc, char** argv,
                                      const ProgressSettings& progress);

// Adds --progress-every and --quiet to a command's options.
void add_progress_options(boost::program_options::options_description& desc, ProgressSettings& progress);

}  // namespace draftlab::cli
