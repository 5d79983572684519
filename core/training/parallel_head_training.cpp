#include "core/training/parallel_head_training.h"

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

ParallelHeadLoss parallel_head_loss(const std::vector<at::Tensor>& logits, const at::Tensor& windows_in,
                                    const at::Tensor& loss_mask, const at::Tensor& features,
                                    const at::Tensor& target_lm_head, const ParallelHeadLossOptions& options) {
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
    if (!mask.defined()) {
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

ParallelHeadTrainingResult train_parallel_heads(const LlamaModel& target, TrainableParallelHeads& heads,
                                                const ParallelHeadTrainingOptions& o, const TextDataset& data) {
  const int64_t K = heads.num_heads();
  const int64_t max_context = target.config().max_position_embeddings - 1;
  check(o.batch > 0, "--batch: expected a positive number, got " + std::to_string(o.batch));
  check(o.context > K && o.context <= max_context,
        "--context: expected " + std::to_string(K + 1) + ".." + std::to_string(max_context) + " (windows are context + 1 "
        "tokens, and head " + std::to_string(K - 1) + " predicts " + std::to_string(K + 1) + " positions ahead), got " +
            std::to_string(o.context));
  check(o.loss.decay > 0 && o.loss.decay <= 1, "--decay: expected a number in (0, 1], got " + std::to_string(o.loss.decay));
  check(!o.out_dir.empty(), "--out: expected a directory");
  std::filesystem::create_directories(o.out_dir);
  const std::string state_path = o.out_dir + "/training_state.safetensors";

  TrainerOptions topt = o.trainer;
  topt.tokens_per_step = o.batch * o.context;
  Trainer trainer(heads.parameters(), topt);
  char decay[32];
  std::snprintf(decay, sizeof decay, "%.17g", o.loss.decay);
  const std::map<std::string, std::string> identity = {
      {"kind", heads.family().name}, {"heads_config", heads.config_json()},
      {"seed", std::to_string(o.seed)},            {"batch", std::to_string(o.batch)},
      {"context", std::to_string(o.context)},       {"decay", decay},
      {"loss_target", o.loss.target == ParallelHeadTarget::Tokens ? "tokens" : "target_distribution"}};
  std::vector<std::vector<double>> head_accuracy;  // one row per validation pass
  if (o.resume) {
    if (!is_file(state_path)) throw Error("--resume: " + state_path + " not found");
    // The identity first: another run's state (other heads) would otherwise fail on a tensor name or shape.
    const auto meta = SafetensorsFile(state_path).metadata();
    for (const auto& [key, value] : identity) {
      auto it = meta.find(key);
      if (it == meta.end() || it->second != value)
        throw Error::in_file(state_path, "metadata " + key, "'" + value + "' (this run's options)",
                             it == meta.end() ? "none" : "'" + it->second + "'");
    }
    trainer.load_state(state_path);
    if (auto it = meta.find("head_eval"); it != meta.end())
      head_accuracy = TrainingCurves::from_json(it->second, state_path).eval_head_accuracy;
  }

  const RotaryEmbedding rope(target.config(), target.options());
  auto target_features = [&](const at::Tensor& windows) {
    at::NoGradGuard no_grad;
    return training_features(target.config(), target.weights(), rope, windows.to(target.options().device));
  };
  const at::Tensor& lm_head = target.weights().lm_head;
  auto loss_of = [&](const at::Tensor& windows, const at::Tensor& mask, const at::Tensor& features) {
    return parallel_head_loss(heads.logits(windows, features), windows, mask, features, lm_head, o.loss);
  };

  const at::Tensor val = data.validation_windows(o.context, o.eval_windows);
  const at::Tensor val_mask = data.has_loss_mask() ? data.validation_window_masks(o.context, o.eval_windows) : at::Tensor();
  const std::unique_ptr<FeatureCache> cache =
      o.feature_cache.path.empty() ? nullptr
                                   : FeatureCache::open_or_build(o.feature_cache, target, data, o.batch, o.context,
                                                                 o.seed, o.trainer.steps);
  Trainer::Hooks hooks;
  hooks.loss = [&](int64_t step) {
    if (cache) {  // the same windows as on the fly for the cached steps, the target's features read back
      const CachedBatch b = cache->batch(step);
      return loss_of(b.windows, b.mask, b.features).loss;
    }
    const auto windows = data.train_batch(o.batch, o.context, o.seed, step);
    const at::Tensor mask = data.has_loss_mask() ? data.train_batch_mask(o.batch, o.context, o.seed, step) : at::Tensor();
    return loss_of(windows, mask, target_features(windows)).loss;
  };
  hooks.eval_loss = [&] {
    at::NoGradGuard no_grad;
    double total = 0;
    std::vector<int64_t> correct(static_cast<size_t>(K), 0), count(static_cast<size_t>(K), 0);
    for (int64_t i = 0; i < val.size(0); i += o.batch) {
      const auto part = val.narrow(0, i, std::min(o.batch, val.size(0) - i));
      const auto l = loss_of(part, val_mask.defined() ? val_mask.narrow(0, i, part.size(0)) : at::Tensor(),
                             target_features(part));
      total += l.loss.item<double>() * static_cast<double>(part.size(0));
      for (int64_t k = 0; k < K; ++k) correct[k] += l.correct[k], count[k] += l.count[k];
    }
    std::vector<double> accuracy;
    std::string line;
    for (int64_t k = 0; k < K; ++k) {
      accuracy.push_back(count[k] ? static_cast<double>(correct[k]) / static_cast<double>(count[k]) : 0.0);
      char buf[16];
      std::snprintf(buf, sizeof buf, " %.4f", accuracy.back());
      line += buf;
    }
    head_accuracy.push_back(accuracy);
    const double loss = total / static_cast<double>(val.size(0));
    if (!o.trainer.quiet)
      std::fprintf(stderr, "\nvalidation at step %ld: loss %.4f, top-1 accuracy per head%s\n",
                   static_cast<long>(trainer.step()), loss, line.c_str());
    return loss;
  };
  auto curves = [&] {
    TrainingCurves c = trainer.curves();
    c.eval_head_accuracy = head_accuracy;
    return c;
  };
  hooks.save = [&](int64_t) {
    heads.save(o.out_dir, o.save_dtype);
    std::map<std::string, std::string> meta = identity;
    TrainingCurves head_eval;
    head_eval.eval_head_accuracy = head_accuracy;
    meta["head_eval"] = head_eval.to_json();
    trainer.save_state(state_path, meta);
    std::map<std::string, std::string> attrs = identity;
    attrs["command_line"] = o.command_line;
    attrs["date"] = utc_timestamp();
    write_training_log(o.out_dir + "/training_log.h5", curves(), attrs);
  };
  trainer.run(hooks);

  ParallelHeadTrainingResult result;
  for (const auto& [name, p] : heads.parameters()) result.parameters += p.numel();
  result.tokens_per_second = trainer.tokens_per_second();
  result.curves = curves();
  return result;
}

}  // namespace draftlab
