#include "strategies/parallel_heads/parallel_head_training.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/safetensors.h"
#include "core/io/tensor_entry.h"
#include "core/model/rope.h"
#include "core/model/training_forward.h"

namespace draftlab {

double parallel_head_weight(const ParallelHeadLossOptions& options, int64_t k) {
  return std::pow(options.decay, static_cast<double>(k + 1));
}

void apply_official_parallel_recipe(const OfficialParallelRecipe& recipe, TrainerOptions& t,
                                    ParallelHeadLossOptions& loss,
                                    const std::function<bool(const std::string& flag)>& given) {
  auto set = [&](const char* flag, auto& field, auto value) {
    if (!given || !given(flag)) field = value;
  };
  loss.recipe = "official";
  set("decay", loss.decay, 1.0);
  set("teacher", loss.target, recipe.target);
  set("beta1", t.beta1, 0.9);
  set("beta2", t.beta2, 0.999);
  set("grad-clip", t.grad_clip, 1.0);
  t.clip_by_value = false;  // Hugging Face clips by global norm
  set("lr", t.lr, recipe.lr);
  set("weight-decay", t.weight_decay, recipe.weight_decay);
  set("warmup", t.warmup,
      recipe.warmup_one_in > 0 ? (t.steps + recipe.warmup_one_in - 1) / recipe.warmup_one_in : recipe.warmup_steps);
  set("min-lr-ratio", t.min_lr_ratio, recipe.min_lr_ratio);
}

namespace {

// The options of a run: --recipe official applied unless a flag was given explicitly.
ParallelHeadTrainingOptions training_options(const HeadTrainingRun& run, const OfficialParallelRecipe& official) {
  ParallelHeadTrainingOptions o;
  static_cast<HeadTrainingOptions&>(o) = run.common;
  o.loss.decay = run.options.get_double("decay");
  o.loss.target = run.options.get_bool("teacher") ? ParallelHeadTarget::TargetDistribution : ParallelHeadTarget::Tokens;
  o.loss.recipe = run.options.get_string("recipe");
  if (o.loss.recipe == "official")
    apply_official_parallel_recipe(official, o.trainer, o.loss, [&](const std::string& flag) {
      return run.options.given(flag) || (run.given && run.given(flag));
    });
  return o;
}

}  // namespace

HeadFamily parallel_head_family(const ParallelHeadFamilyText& text, const OfficialParallelRecipe& official,
                                ParallelHeadTrainer train) {
  HeadFamily f;
  f.name = text.name;
  f.title = text.title;
  f.summary = text.summary;
  const std::string key = text.name + "_num_heads";
  f.recognises = [key](const nlohmann::json& config) { return config.contains(key); };
  f.tree_strategy = text.name;
  f.training_options = {
      choice_option("recipe", {"paper", "official"}, text.recipe_help),
      number_option("decay", 0.8, 0, 1,
                    "head k's loss weight is decay^(k+1) (the Medusa paper's 0.8^k for heads 1..K; 0 < decay <= 1); "
                    "1 = unweighted sum"),
      bool_option("teacher", false,
                  "learn the target's distribution of each label (Hydra++'s teacher loss) instead of the data's token"),
      integer_option(text.name + "-heads", 4, 1, 64, text.heads_help),
      integer_option(text.name + "-layers", 1, text.min_layers, 64, text.layers_help),
      choice_option(text.name + "-lm-head", {"shared", "own"}, text.lm_head_help)};
  f.check_training_options = [](const StrategyOptions& o) {
    check(o.get_double("decay") > 0, "--decay: expected a number in (0, 1], got " + o.get_string("decay"));
  };
  const std::string prefix = text.name;
  f.train = [prefix, &official, train](const HeadTrainingRun& run) {
    ParallelHeadShape shape;
    shape.heads = run.options.get_int(prefix + "-heads");
    shape.layers = run.options.get_int(prefix + "-layers");
    shape.own_lm_head = run.options.get_string(prefix + "-lm-head") == "own";
    return train(run, shape, training_options(run, official));
  };
  return f;
}

ParallelHeadLoss parallel_head_loss(const std::vector<at::Tensor>& logits, const at::Tensor& windows_in,
                                    const at::Tensor& loss_mask, const at::Tensor& features,
                                    const at::Tensor& target_lm_head, const ParallelHeadLossOptions& options,
                                    const StepShare& share) {
  check(windows_in.dim() == 2 && windows_in.size(1) >= 2, "parallel head loss: windows must be [batch, length + 1]");
  check(!logits.empty(), "parallel head loss: no heads");
  const int64_t B = windows_in.size(0), T = windows_in.size(1) - 1;
  const at::Device device = logits[0].device();
  const at::Tensor windows = windows_in.to(device);
  at::Tensor mask;
  if (loss_mask.defined()) {
    check(loss_mask.dim() == 2 && loss_mask.size(0) == B && loss_mask.size(1) == T + 1,
          "parallel head loss: loss_mask must be [batch, length + 1] = [" + std::to_string(B) + ", " +
              std::to_string(T + 1) + "], got " + shape_string(loss_mask.sizes().vec()));
    mask = loss_mask.to(device).ne(0);
  }
  // float32 losses (half-precision heads upcast); float64 heads stay float64 for numerical checks.
  const at::ScalarType loss_type = logits[0].scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  ParallelHeadLoss out;
  out.loss = at::zeros({}, at::TensorOptions().dtype(loss_type).device(device));
  for (size_t head = 0; head < logits.size(); ++head) {
    const auto k = static_cast<int64_t>(head);
    const int64_t n = T - k - 1;
    check(n >= 1, "parallel head loss: head " + std::to_string(k) + " has no row in windows of " + std::to_string(T + 1) +
                      " tokens (it predicts " + std::to_string(k + 2) + " positions ahead)");
    const at::Tensor& lg = logits[head];
    check(lg.dim() == 3 && lg.size(0) == B && lg.size(1) == n,
          "parallel head loss: head " + std::to_string(k) + " logits must be [" + std::to_string(B) + ", " +
              std::to_string(n) + ", vocab], got " + shape_string(lg.sizes().vec()));
    const at::Tensor log_probs = at::log_softmax(lg.to(loss_type), -1);
    const at::Tensor labels = windows.narrow(1, k + 2, n);
    at::Tensor nll;  // [B, n]
    if (options.target == ParallelHeadTarget::Tokens) {
      nll = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1);
    } else {
      check(features.defined() && target_lm_head.defined(),
            "parallel head loss: the target-distribution loss needs the features and the target's LM head");
      at::Tensor teacher;
      {
        at::NoGradGuard no_grad;
        const at::Tensor f = features.narrow(1, k + 1, n).to(device, target_lm_head.scalar_type());
        teacher = at::softmax(at::matmul(f, target_lm_head.t()).to(loss_type), -1);
      }
      nll = -(teacher * log_probs).sum(-1);
    }
    const at::Tensor top1 = lg.detach().argmax(-1).eq(labels);
    at::Tensor ce;
    if (share.partial()) {  // a part's rows: their sum over the whole step's count
      const double whole = share.step_mask.defined()
                               ? std::max(share.step_mask.narrow(1, k + 2, n).ne(0).sum().item<double>(), 1.0)
                               : static_cast<double>(share.step_rows * n);
      const at::Tensor rows = mask.defined() ? mask.narrow(1, k + 2, n) : at::ones_like(labels, at::kBool);
      ce = (nll * rows.to(loss_type)).sum() / whole;
      out.correct.push_back(top1.logical_and(rows).sum().item<int64_t>());
      out.count.push_back(rows.sum().item<int64_t>());
    } else if (!mask.defined()) {
      ce = nll.mean();
      out.correct.push_back(top1.sum().item<int64_t>());
      out.count.push_back(B * n);
    } else {
      const at::Tensor rows = mask.narrow(1, k + 2, n);
      const at::Tensor counted = rows.sum();
      ce = (nll * rows.to(loss_type)).sum() / at::clamp_min(counted.to(loss_type), 1.0);
      out.correct.push_back(top1.logical_and(rows).sum().item<int64_t>());
      out.count.push_back(counted.item<int64_t>());
    }
    out.loss = out.loss + parallel_head_weight(options, k) * ce;
    out.head_loss.push_back(ce.item<double>());
  }
  return out;
}

namespace {

// The parallel heads as a TrainableHead: their logits, parallel_head_loss, per-head accuracy.
class ParallelTrainable : public TrainableHead {
 public:
  ParallelTrainable(const LlamaModel& target, TrainableParallelHeads& heads, ParallelHeadLossOptions loss)
      : target_(target), heads_(heads), loss_options_(loss) {}

  std::string family_name() const override { return heads_.family_name(); }
  std::vector<std::pair<std::string, at::Tensor>> parameters() const override { return heads_.parameters(); }
  std::map<std::string, std::string> identity() const override {
    char decay[32];
    std::snprintf(decay, sizeof decay, "%.17g", loss_options_.decay);
    return {{"kind", heads_.family_name()},
            {"heads_config", heads_.config_json()},
            {"decay", decay},
            {"loss_target", loss_options_.target == ParallelHeadTarget::Tokens ? "tokens" : "target_distribution"},
            {"recipe", loss_options_.recipe}};
  }
  // States written before --recipe existed were the paper's.
  std::string identity_default(const std::string& key) const override { return key == "recipe" ? "paper" : ""; }
  int64_t min_context() const override { return heads_.num_heads() + 1; }
  at::Tensor loss(const HeadBatch& b, int64_t) const override { return of(b).loss; }  // a shard's share, too
  HeadEvaluation evaluate(const HeadBatch& b) const override {
    const ParallelHeadLoss l = of(b);
    HeadEvaluation e;
    e.loss = l.loss.item<double>();
    for (size_t k = 0; k < l.correct.size(); ++k) e.counts["head_accuracy"].emplace_back(l.correct[k], l.count[k]);
    return e;
  }
  void save(const std::string& dir, at::ScalarType file_dtype) const override { heads_.save(dir, file_dtype); }

 private:
  ParallelHeadLoss of(const HeadBatch& b) const {
    return parallel_head_loss(heads_.logits(b.windows, b.features), b.windows, b.mask, b.features,
                              target_.weights().lm_head, loss_options_, b.share);
  }
  const LlamaModel& target_;
  TrainableParallelHeads& heads_;
  ParallelHeadLossOptions loss_options_;
};

}  // namespace

HeadTrainingResult train_parallel_heads(const LlamaModel& target, TrainableParallelHeads& heads,
                                        const ParallelHeadTrainingOptions& o, const TextDataset& data) {
  check(o.loss.decay > 0 && o.loss.decay <= 1, "--decay: expected a number in (0, 1], got " + std::to_string(o.loss.decay));
  check_recipe(o.loss.recipe);
  ParallelTrainable trainable(target, heads, o.loss);
  return train_draft_head(target, trainable, o, data);
}

}  // namespace draftlab
