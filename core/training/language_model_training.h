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
#include "core/training/training_run.h"
#include "core/model/llama_weights.h"
#include "core/model/rope.h"

namespace draftlab {

// What a language model learns from its windows [B, T + 1]: by default the next token (objective null); a parallel
// draft (strategies/pard) brings its own.
class LmObjective {
 public:
  virtual ~LmObjective() = default;
  // The objective and its settings, recorded in the log and in the resume identity.
  virtual std::string describe() const = 0;
  // The mean loss of the windows; `seed` draws whatever is random in it (the same seed, the same loss).
  virtual at::Tensor loss(const ModelConfig& config, const LlamaWeights& weights, const RotaryEmbedding& rope,
                          const at::Tensor& windows, uint64_t seed) const = 0;
};

// The run's options (training_run.h: batch = windows per step, context = tokens per window, seed = initial weights
// and every batch) and the model's. Data parallel: a mixture of experts' load-balancing loss is computed per rank
// (over its rows), so only dense models equal one process exactly.
struct LmTrainingOptions : TrainingRunOptions {
  ModelConfig config;          // max_position_embeddings must cover `context`
  std::string tokenizer_path;  // copied into out_dir ("" = none)
  ComputeOptions compute;
  // Fine-tuning: start from this model's weights (a folder LlamaModel::load reads) instead of random ones; its
  // shape must be `config`'s.
  std::string init_from;
  std::shared_ptr<const LmObjective> objective;  // null: next-token cross-entropy
};

using LmTrainingResult = TrainingRunResult;

// The checks that need no data (train-lm runs them before its corpus loads; train_language_model again): the model
// shape, --context, and the run's (check_training_run_options). Throws Error naming the option.
void check_lm_training_options(const LmTrainingOptions& options);

// Throws Error naming the option or file on a bad configuration, a missing or mismatched resume state.
LmTrainingResult train_language_model(const LmTrainingOptions& options, const TextDataset& data);

}  // namespace draftlab
