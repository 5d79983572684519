// Training a draft head for a frozen target: the one pipeline every head family trains through
// (`draftlab train-head --kind FAMILY`). A family supplies a TrainableHead (its parameters, its loss on a batch, its
// validation metrics, its folder); train_draft_head supplies the rest, the same for all: the data (TextDataset
// windows and loss masks, or an HDF5 FeatureCache replaying them), the frozen target's features, the Trainer
// (AdamW, schedule, clipping, progress), validation, checkpoints, exact resume and the training log.
//
// Families: EAGLE-1/2 (eagle_head_training.h), Medusa and Hydra (parallel_head_training.h), EAGLE-3
// (eagle3_training.h).
//
// DIR after a run:
//   the family's head folder (TrainableHead::save)
//   training_state.safetensors   parameters, AdamW moments, step, curves (metrics included): --resume continues
//                                exactly, refused unless the run's identity (family, options, head shape) matches
//   training_log.h5              the curves and the family's declared metrics (core/results/training_curves.h)
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/distributed/data_parallel.h"
#include "core/model/llama_model.h"
#include "core/training/feature_cache.h"
#include "core/training/text_dataset.h"
#include "core/training/training_run.h"
#include "core/training/training_log.h"

namespace draftlab {

// A part of a step (batch_part.h: a rank's rows, or a micro-batch of them): which rows of the step a batch holds.
// A family divides its sums by the whole step's count (from step_mask, or step_rows rows when there is no mask), so
// the parts' losses add up to the step's loss, and draws anything random for the whole step, keeping these rows.
// step_rows 0: the batch is the whole step.
struct StepShare {
  int64_t first_row = 0, step_rows = 0;
  at::Tensor step_mask;     // [step_rows, T + 1] the whole step's loss mask (undefined: none)
  at::Tensor step_lengths;  // [step_rows] its real tokens per row (undefined: none)

  bool partial() const { return step_rows > 0; }
};

// One batch: windows w_0..w_T, their loss mask, and the frozen target's features of every window token.
struct HeadBatch {
  at::Tensor windows;   // [B, T + 1] int64
  at::Tensor mask;      // [B, T + 1] 0/1 over the window tokens; undefined: every position counts
  // [B, T + 1, width]: the residual after each of TrainableHead::feature_layers() side by side, then the final
  // normed hidden state (what the target's LM head reads): width = (layers + 1) d.
  at::Tensor features;
  // [B] int64: the real tokens of each row (rows of whole sequences are right-padded, the padding masked out);
  // undefined: all T + 1. Only rules that count a row by its input token need it (the official EAGLE mask[i]).
  at::Tensor lengths;
  StepShare share;  // a part's rows of the step (default: the whole step)

  int64_t rows_in_step() const { return share.partial() ? share.step_rows : windows.size(0); }
};

// The target's features of windows [B, T + 1] as HeadBatch::features lays them out (no gradient).
at::Tensor head_batch_features(const LlamaModel& target, const at::Tensor& windows,
                               const std::vector<int64_t>& feature_layers);

// Validation counts of one batch: its loss (a mean over its rows) and, per declared metric
// (training_curves.h), per column, (hits, tries); the pipeline sums them over the validation batches.
struct HeadEvaluation {
  double loss = 0;
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> counts;
};

// The extension point: one implementation per head family.
class TrainableHead {
 public:
  virtual ~TrainableHead() = default;

  // Its family (HeadFamily::name, strategies/head_family.h): recorded in the training state and log.
  virtual std::string family_name() const = 0;
  // Leaf tensors for the Trainer (names key the training state).
  virtual std::vector<std::pair<std::string, at::Tensor>> parameters() const = 0;
  // What a resumed run must match besides family, seed, batch and context: the head's shape and the family's
  // options, recorded in the training state and the log's attributes.
  virtual std::map<std::string, std::string> identity() const = 0;
  // The value a state written before `key` existed stands for ("" = none: such a state is refused).
  virtual std::string identity_default(const std::string& key) const {
    (void)key;
    return "";
  }
  // Which target layers HeadBatch::features carries besides the final normed hidden state.
  virtual std::vector<int64_t> feature_layers() const { return {}; }
  // The smallest --context the head can train on.
  virtual int64_t min_context() const { return 1; }
  // The training loss of step `step` (with its graph); anything random in it derives from (seed, step).
  virtual at::Tensor loss(const HeadBatch& batch, int64_t step) const = 0;
  // Validation (called without gradient).
  virtual HeadEvaluation evaluate(const HeadBatch& batch) const = 0;
  // Writes the family's head folder.
  virtual void save(const std::string& dir, at::ScalarType file_dtype) const = 0;
};

// The options every family shares (train-head's common flags): the run's (training_run.h: context = positions per
// window, windows are context + 1 tokens; seed = every batch and anything random in the loss, the initial weights
// being the family's) and the data's.
struct HeadTrainingOptions : TrainingRunOptions {
  std::string data_description;  // the training log's `data` attribute: file, format, the fraction kept
  // Training windows' target features from an HDF5 cache (built on first use) instead of the target; empty path:
  // on the fly. A dataset with a loss mask passes it to the loss either way.
  FeatureCacheOptions feature_cache;
};

using HeadTrainingResult = TrainingRunResult;

// --recipe: "paper" (draftlab's documented defaults) or "official" (the family's official trainer). Throws Error
// naming the flag otherwise.
void check_recipe(const std::string& recipe);

// Trains `head` in place and writes out_dir (above). Throws Error naming the option or file on a bad configuration
// or a resume state of another run.
HeadTrainingResult train_draft_head(const LlamaModel& target, TrainableHead& head, const HeadTrainingOptions& options,
                                    const TextDataset& data);

}  // namespace draftlab
