// Trainer - the optimisation loop shared by every trainer in draftlab (the language model now, EAGLE heads
// next): AdamW (decoupled weight decay on matrices only), cosine schedule with linear warm-up, clipping by
// global gradient norm, periodic validation and checkpoints, a progress line, and a training state that resumes
// a run exactly (parameters, Adam moments, step, curves).
//
// The trainer knows nothing about models: the caller gives named parameter tensors and closures for the loss
// of a step, the validation loss, and what to save. Data for step s must depend only on (seed, s), so a resumed
// run sees the same batches as an uninterrupted one.
//
// Parts of a step (batch_part.h): the loss closure computes one BatchPart of the step's batch and returns that
// part's share of the step's loss (the shares add up to the whole batch's loss). One process calls it once with
// the whole batch; gradient accumulation (options.accumulate = A) calls it A times per step, backward after each,
// so only one part's activations are alive at a time. Data parallel (a DataParallel given): rank 0's initial
// parameters are broadcast; each rank computes its own parts, and the gradients are summed over the ranks before
// clipping, so every rank takes the same step. Hooks::loss and Hooks::eval_loss run on every rank (they
// may use collectives); Hooks::save and save_best run on rank 0 alone, and a failure there ends every rank.
// Progress lines come from rank 0 only.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/training/batch_part.h"
#include "core/training/lr_schedule.h"
#include "core/training/training_log.h"

namespace torch::optim {
class AdamW;
}

namespace draftlab {

class DataParallel;

struct TrainerOptions {
  int64_t steps = 1000;
  double lr = 1e-3;            // peak learning rate
  int64_t warmup = 100;        // linear warm-up steps
  double min_lr_ratio = 0.1;   // the cosine ends at min_lr_ratio * lr
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;   // applied to matrices (dim >= 2) only, not to norm gains
  double grad_clip = 1.0;      // max global L2 norm of the gradients; 0 = no clipping
  bool clip_by_value = false;  // grad_clip clamps each gradient element to +-grad_clip instead (the official EAGLE
                               // trainer's clip_grad_value_)
  int64_t eval_every = 100;    // validation every K steps (and before the first and after the last); 0 = never
  int64_t save_every = 0;      // checkpoint every N steps (and after the last); 0 = only after the last
  int64_t log_every = 50;      // plain progress line every N steps when stderr is not a terminal
  bool quiet = false;          // no progress output at all
  int64_t tokens_per_step = 0; // for tokens/s in the progress line
  int64_t stop_at = 0;         // end this invocation after this step (with a checkpoint), keeping the schedule of
                               // `steps`: splits a run across jobs; 0 = run to `steps`
  int64_t patience = 0;        // early stopping: end (with a checkpoint) after this many validations in a row
                               // without a new best validation loss; 0 = run to `steps`
  int64_t accumulate = 1;      // gradient accumulation: micro-batches per rank per step (the same step, less memory)
};

// Throws Error naming the flag (--steps, --lr, --warmup, --accumulate) of an option out of range: the commands call
// it before anything loads, the Trainer again.
void check_trainer_options(const TrainerOptions& options);

class Trainer {
 public:
  // `parameters`: leaf tensors to optimise, by name (the names key the training state). requires_grad is set here.
  // `parallel`: the data-parallel group this rank trains in (null: one process).
  Trainer(std::vector<std::pair<std::string, at::Tensor>> parameters, TrainerOptions options,
          std::shared_ptr<DataParallel> parallel = nullptr);
  ~Trainer();

  struct Hooks {
    // Scalar training loss of `part` of step `step` (0-based), with its graph: the part's share of the step's loss.
    std::function<at::Tensor(int64_t step, const BatchPart& part)> loss;
    std::function<double()> eval_loss;              // optional: mean held-out loss, computed without gradients
    std::function<void(int64_t steps_done)> save;   // optional: write a checkpoint (call save_state from it)
    std::function<void(int64_t steps_done)> save_best;  // optional: called after a validation that is the best so far
  };

  // The lowest validation loss in the curves so far and its step (step -1 when there was no validation).
  struct BestEval {
    int64_t step = -1;
    double loss = 0;
    int64_t evals_since = 0;  // validations after it that did not improve on it
  };
  BestEval best_eval() const;

  // Runs from step() up to options.steps (or options.stop_at, or until `patience` runs out).
  void run(const Hooks& hooks);

  // One optimisation step: `part_loss` for each of this rank's parts, then the summed gradients; returns the
  // step's loss (summed over parts and ranks).
  double train_step(const std::function<at::Tensor(const BatchPart& part)>& part_loss);
  // The same for a closure that computes the whole batch in one pass (one process, no accumulation). Public for
  // callers with their own loop.
  double train_step(const std::function<at::Tensor()>& loss);

  int64_t step() const { return step_; }
  const TrainingCurves& curves() const { return curves_; }
  // Records a declared metric (training_curves.h) of the validation pass in progress: call it from
  // Hooks::eval_loss, once per metric and pass, so the curves and the training state carry it.
  void add_eval_metric(const std::string& name, std::vector<double> values) {
    curves_.add_metric(name, std::move(values));
  }
  const TrainerOptions& options() const { return options_; }
  double tokens_per_second() const { return tokens_per_second_; }

  // The training state as safetensors: param/<name>, exp_avg/<name>, exp_avg_sq/<name> in float32, and the step
  // and curves in the metadata (with `metadata` added). Written atomically.
  void save_state(const std::string& path, const std::map<std::string, std::string>& metadata = {}) const;
  // Restores a state written by save_state; throws Error naming the file and tensor on any mismatch.
  // Returns the file's metadata.
  std::map<std::string, std::string> load_state(const std::string& path);
  // --resume, for every trainer: the state at `path` must exist and its metadata carry `identity` (this run's
  // options that must not change within a run: shape, seed, batch, ...) before any tensor loads, so another run's
  // state is refused as such, naming the key. A key absent from an older state stands for absent(key) (none given:
  // absent keys differ). Then load_state; returns the file's metadata.
  std::map<std::string, std::string> resume(const std::string& path, const std::map<std::string, std::string>& identity,
                                            const std::function<std::string(const std::string&)>& absent = {});

 private:
  std::vector<std::pair<std::string, at::Tensor>> params_;
  TrainerOptions options_;
  CosineSchedule schedule_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  int64_t step_ = 0;
  TrainingCurves curves_;
  double tokens_per_second_ = 0;
  std::shared_ptr<DataParallel> parallel_;
};

// Global L2 norm of the gradients; scales them down to max_norm when above it. Returns the norm before scaling.
double clip_gradients(const std::vector<at::Tensor>& parameters, double max_norm);

}  // namespace draftlab
