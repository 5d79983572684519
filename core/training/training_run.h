// A training run: what every trainer (the language model, each head family) shares around the Trainer - the
// options of a run, its checks, the output folder, resuming a state of the same run, and one save order: the model
// files, then the training log, then the training state (once the state holds step N, every other file of the
// checkpoint does too; a run killed in between resumes from the previous state and writes them again). With
// keep_best the model files are those of the best validation so far, written when it happens.
//
// A trainer builds its model and data, then:
//   TrainingRun run(options, parameters, identity);
//   return run.run(loss, eval_loss, save_model, log_attributes);
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/training/trainer.h"

namespace draftlab {

class DataParallel;

// The options every trainer has (train-lm and train-head's shared flags).
struct TrainingRunOptions {
  TrainerOptions trainer;
  int64_t batch = 16;         // rows per step (the global batch, whatever the world size)
  int64_t context = 128;      // positions per row
  uint64_t seed = 0;          // every batch and anything random in the loss
  int64_t eval_windows = 64;  // validation rows per pass
  std::string out_dir;        // created if absent (by rank 0)
  bool resume = false;        // continue from out_dir/training_state.safetensors
  bool keep_best = false;     // the model files are rewritten only at a new best validation loss (so they end as the
                              // best checkpoint, not the last); the training state still follows every save
  std::string command_line;   // recorded in the log
  at::ScalarType save_dtype = at::kFloat;  // of the model files (the training state stays float32)
  // Data parallel: this rank trains on its rows of every step (batch_part.h); rank 0 writes out_dir.
  std::shared_ptr<DataParallel> parallel;
};

struct TrainingRunResult {
  int64_t parameters = 0;
  double tokens_per_second = 0;
  TrainingCurves curves;   // with the trainer's metrics, one row per validation pass
  Trainer::BestEval best;  // lowest validation loss and its step (step -1: no validation)
};

// The checks that need no model or data (the commands run them before anything loads, TrainingRun again): --batch,
// --out, --keep-best's need for validation, the optimiser's options. Throws Error naming the option.
void check_training_run_options(const TrainingRunOptions& options);

class TrainingRun {
 public:
  using Parameters = std::vector<std::pair<std::string, at::Tensor>>;
  using IdentityDefault = std::function<std::string(const std::string& key)>;

  // Checks the options (and that the batch divides into the ranks' parts), makes the trainer, creates out_dir and,
  // with resume, restores the state at out_dir/training_state.safetensors, which must carry `identity` (what must
  // not change within a run: shape, seed, batch, context, ...; a key absent from an older state stands for
  // identity_default(key)). Throws Error naming the option or the file.
  TrainingRun(const TrainingRunOptions& options, Parameters parameters, std::map<std::string, std::string> identity,
              const IdentityDefault& identity_default = {});

  Trainer& trainer() { return trainer_; }
  // The resumed state's metadata (empty without resume).
  const std::map<std::string, std::string>& resumed_metadata() const { return resumed_; }

  // Runs the Trainer to its end. `save_model` writes the model files into out_dir (rank 0); `log_attributes` are
  // recorded in training_log.h5 beside the identity, the command line, the date and the best validation.
  TrainingRunResult run(const std::function<at::Tensor(int64_t step, const BatchPart& part)>& loss,
                        const std::function<double()>& eval_loss, const std::function<void()>& save_model,
                        const std::map<std::string, std::string>& log_attributes = {});

 private:
  TrainingRunOptions options_;
  std::map<std::string, std::string> identity_;
  int64_t parameter_count_ = 0;  // before trainer_, which takes the parameters
  Trainer trainer_;
  std::map<std::string, std::string> resumed_;
};

}  // namespace draftlab
