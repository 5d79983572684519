// Training parallel draft heads for a frozen target: heads that read the target's feature at one position and each
// predict a token further ahead (Medusa-1, strategies/medusa/medusa_training.h; Hydra's heads, which also read the
// tokens between, fit the same mould). A kind supplies its heads (TrainableParallelHeads: parameters, the
// differentiable logits, its folder); this file supplies the loss and validation, and head_training.h the rest
// (data, the frozen target's features, checkpoints, resume). `draftlab train-head --kind KIND` runs it.
//
// Data: windows w_0..w_T of T + 1 tokens (TextDataset::train_batch, or a FeatureCache replaying them), and the
// target's features f_0..f_T (its final normed hidden states, LlamaModel::forward's `features`; f_i feeds the LM
// head that predicts w_{i+1}). Head k (0-based) at position i predicts w_{i+k+2}, for i = 0 .. T-k-2 (the label
// must lie inside the window): T - k - 1 rows per window.
//
// Loss = sum_k lambda_k CE_k, CE_k the mean over head k's counted rows of -log softmax(logits)[label], with
//   lambda_k = decay^(k+1): the Medusa paper's lambda_k = 0.8^k for heads k = 1..K (section 2.2.1), as
//     ctlllll/axolotl's medusa_decay_coefficient applies it (its extra 0.2 heads coefficient is a constant factor
//     left out); decay = 1 is the unweighted sum of FasterDecoding/Medusa's original Medusa-1 script.
//   label: the window's token w_{i+k+2} (Medusa; on target-generated data, the target's own continuation), or
//     soft: the target's distribution of that token given the true prefix, softmax(lm_head(f_{i+k+1})) (Hydra's
//     teacher loss, ParallelHeadTarget::TargetDistribution).
// With a loss mask (chat data, generated continuations), head k's row i counts iff mask[i + k + 2].
// Validation: the same loss and each head's top-1 accuracy (argmax == w_{i+k+2}) on the validation windows.
//
// DIR after a run:
//   the kind's head folder (TrainableParallelHeads::save: config.json, model.safetensors)
//   training_state.safetensors   parameters, AdamW moments, step, curves: --resume continues exactly
//   training_log.h5              the loss curves and /eval/head_accuracy [passes, K]
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/training/head_training.h"
#include "core/model/llama_model.h"
#include "core/training/feature_cache.h"
#include "core/training/text_dataset.h"
#include "core/training/trainer.h"
#include "strategies/head_family.h"

namespace draftlab {

// The extension point: one implementation per kind of parallel heads.
class TrainableParallelHeads {
 public:
  virtual ~TrainableParallelHeads() = default;

  virtual std::string family_name() const = 0;
  virtual int64_t num_heads() const = 0;
  // Named leaf tensors for the Trainer (names key the training state).
  virtual std::vector<std::pair<std::string, at::Tensor>> parameters() const = 0;
  // windows [B, T + 1] int64 and the frozen target's features [B, T + 1, d] -> one tensor per head, head k's
  // [B, T - k - 1, vocab]: row i is its prediction of w_{i+k+2} from position i (Medusa reads f_i; a kind that
  // also reads tokens takes w_{i+1} .. w_{i+k+1} from the window). Differentiable in parameters().
  virtual std::vector<at::Tensor> logits(const at::Tensor& windows, const at::Tensor& features) const = 0;
  // The heads' shape as JSON text: a resumed run must have the same.
  virtual std::string config_json() const = 0;
  // Writes the head folder the kind's loader reads.
  virtual void save(const std::string& dir, at::ScalarType file_dtype) const = 0;
};

enum class ParallelHeadTarget { Tokens, TargetDistribution };

struct ParallelHeadLossOptions {
  double decay = 0.8;  // lambda_k = decay^(k+1)
  ParallelHeadTarget target = ParallelHeadTarget::Tokens;
  std::string recipe = "paper";  // or "official" (apply_official_parallel_recipe); part of a run's identity
};

// --recipe official for Medusa and Hydra heads: the official trainers' settings, which differ from draftlab's
// defaults (0.8^(k+1) head weights, AdamW beta2 0.95, lr 3e-4, clip by global norm 0.5, cosine to 0.1 lr). Both sum
// the head losses unweighted, use AdamW (0.9, 0.999) and clip by global norm 1 (Hugging Face's default); each family
// declares the rest in its folder (medusa_official_recipe, hydra_official_recipe). Not reproduced: their 2048-token
// conversations, batch sizes, bf16 parameters, Hydra++'s prefix layer and dropout.
struct OfficialParallelRecipe {
  ParallelHeadTarget target = ParallelHeadTarget::Tokens;
  double lr = 1e-3, weight_decay = 0.0, min_lr_ratio = 0.0;
  // Warm-up: ceil(steps / warmup_one_in) when set (Hugging Face's warmup_ratio 1 / N), else warmup_steps.
  int64_t warmup_one_in = 0, warmup_steps = 0;
};

// Sets every field named above (and loss.recipe) but those whose train-head flag `given` says the user set (--lr,
// --min-lr-ratio, --warmup, --weight-decay, --beta1, --beta2, --grad-clip, --decay, --teacher).
void apply_official_parallel_recipe(const OfficialParallelRecipe& recipe, TrainerOptions& trainer,
                                    ParallelHeadLossOptions& loss,
                                    const std::function<bool(const std::string& flag)>& given = {});

// lambda_k of the header comment.
double parallel_head_weight(const ParallelHeadLossOptions& options, int64_t k);

struct ParallelHeadLoss {
  at::Tensor loss;                   // scalar sum_k lambda_k CE_k, with its graph
  std::vector<double> head_loss;     // CE_k
  std::vector<int64_t> correct, count;  // per head: top-1 == label, rows counted
};

// The loss of per-head logits (as TrainableParallelHeads::logits returns them) on windows [B, T + 1].
// loss_mask [B, T + 1] (undefined: every row counts). features [B, T + 1, d] and target_lm_head [vocab, d] are read
// for ParallelHeadTarget::TargetDistribution only. Throws Error on shapes that do not fit.
// A part of a step (share.partial(): a rank's rows or a micro-batch, head_training.h): each CE_k is this share's sum
// over the whole step's count, so the parts' losses add up to the step's.
ParallelHeadLoss parallel_head_loss(const std::vector<at::Tensor>& logits, const at::Tensor& windows,
                                    const at::Tensor& loss_mask, const at::Tensor& features,
                                    const at::Tensor& target_lm_head, const ParallelHeadLossOptions& options,
                                    const StepShare& share = {});

// The parallel heads' options, besides the ones every family shares.
struct ParallelHeadTrainingOptions : HeadTrainingOptions {
  ParallelHeadLossOptions loss;
};

// What a family of parallel heads (Medusa, Hydra) declares about itself; parallel_head_family() builds the rest:
// recognition by "<name>_num_heads" in config.json, its tree strategy <name>, the train-head flags both share
// (--recipe, --decay, --teacher) and the shape flags --<name>-heads, --<name>-layers, --<name>-lm-head.
struct ParallelHeadFamilyText {
  std::string name, title, summary;
  std::string recipe_help;  // what --recipe official sets for this family
  std::string heads_help, layers_help, lm_head_help;
  int64_t min_layers = 1;
};
struct ParallelHeadShape {
  int64_t heads = 0, layers = 0;
  bool own_lm_head = false;
};
using ParallelHeadTrainer = std::function<HeadTrainingResult(const HeadTrainingRun& run, const ParallelHeadShape& shape,
                                                             const ParallelHeadTrainingOptions& options)>;
HeadFamily parallel_head_family(const ParallelHeadFamilyText& text, const OfficialParallelRecipe& official,
                                ParallelHeadTrainer train);

// Trains `heads` in place and writes out_dir (above). Throws Error naming the option or file on a bad configuration
// or a resume state of another run.
// Through train_draft_head (head_training.h), with eval/head_accuracy [passes, K] as the metric.
HeadTrainingResult train_parallel_heads(const LlamaModel& target, TrainableParallelHeads& heads,
                                        const ParallelHeadTrainingOptions& options, const TextDataset& data);

}  // namespace draftlab
