// Pretraining a Llama from scratch on a TextDataset: model + data + Trainer, writing a Hugging Face folder that
// `draftlab generate --model DIR` runs. `draftlab train-lm` is a thin command line over this.
//
// DIR after a run:
//   config.json, model.safetensors (float32)   the model, as LlamaModel::save_hf writes it (the last checkpoint,
//                                              or with keep_best the one of lowest validation loss)
//   tokenizer.json (or the tokenizer file's own name)   a copy of the tokenizer trained with
//   training_state.safetensors                 parameters, AdamW moments, step, curves: --resume continues exactly
//   training_log.h5                            the loss curves (see core/training/training_log.h)
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/io/model_config.h"
#include "core/model/compute_options.h"
#include "core/distributed/data_parallel.h"
#include "core/training/text_dataset.h"
#include "core/training/trainer.h"

namespace draftlab {

struct LmTrainingOptions {
  ModelConfig config;  // max_position_embeddings must cover `context`
  TrainerOptions trainer;
  int64_t batch = 16;
  int64_t context = 128;      // tokens per training window
  uint64_t seed = 0;          // initial weights and every batch
  int64_t eval_windows = 64;  // validation windows per evaluation
  std::string out_dir;        // created if absent
  bool resume = false;        // continue from out_dir/training_state.safetensors
  bool keep_best = false;     // model.safetensors is rewritten only at a new best validation loss (so it ends as
                              // the best checkpoint, not the last); the training state still follows every step
  std::string tokenizer_path; // copied into out_dir ("" = none)
  std::string command_line;   // recorded in the log
  at::ScalarType save_dtype = at::kFloat;  // of model.safetensors (the training state stays float32)
  ComputeOptions compute;
  // Data parallel: this rank trains on its rows of every step (batch_part.h), rank 0 writes out_dir.
  // The same global batch (`batch`) whatever the world size; a mixture of experts' load-balancing loss is
  // computed per rank (over its rows), so only dense models equal one process exactly.
  std::shared_ptr<DataParallel> parallel;
};

struct LmTrainingResult {
  int64_t parameters = 0;
  double tokens_per_second = 0;
  TrainingCurves curves;
  Trainer::BestEval best;  // lowest validation loss and its step
};

// The checks that need no data (train-lm runs them before its corpus loads; train_language_model again): the model
// shape, --batch, --context, --out, --keep-best's need for validation. Throws Error naming the option.
void check_lm_training_options(const LmTrainingOptions& options);

// Throws Error naming the option or file on a bad configuration, a missing or mismatched resume state.
LmTrainingResult train_language_model(const LmTrainingOptions& options, const TextDataset& data);

}  // namespace draftlab
