#include "core/training/eagle_head_training.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/model/training_forward.h"

namespace draftlab {

namespace {

at::Tensor leaf(const at::Tensor& t) { return t.detach().contiguous().clone(); }

// The head's trainable tensors with `f` applied to each (EagleHeadWeights minus the unused input norm).
template <class F>
EagleHeadWeights map_weights(const EagleHeadWeights& w, F f) {
  EagleHeadWeights out;
  out.fc = f(w.fc);
  out.fc_bias = w.fc_bias.defined() ? f(w.fc_bias) : at::Tensor();  // bias-free heads have none
  out.layer.wqkv = f(w.layer.wqkv);
  out.layer.wo = f(w.layer.wo);
  out.layer.mlp_norm = f(w.layer.mlp_norm);
  out.layer.w_gate_up = f(w.layer.w_gate_up);
  out.layer.w_down = f(w.layer.w_down);
  return out;
}

ModelConfig head_config(const LlamaModel& target) {
  ModelConfig c = target.config();
  c.num_hidden_layers = 1;
  c.tie_word_embeddings = false;
  return c;
}

}  // namespace

HeadTrainingModel::HeadTrainingModel(const LlamaModel& target, uint64_t seed)
    : target_(target),
      config_(head_config(target)),
      target_rope_(target.config(), target.options()),
      rope_(config_, target.options()) {
  const auto head = EagleHead::random(target, seed);
  w_ = map_weights(head->weights(), leaf);
}

std::vector<std::pair<std::string, at::Tensor>> HeadTrainingModel::parameters() const {
  return {{"fc", w_.fc},
          {"fc_bias", w_.fc_bias},
          {"layers.0.wqkv", w_.layer.wqkv},
          {"layers.0.wo", w_.layer.wo},
          {"layers.0.mlp_norm", w_.layer.mlp_norm},
          {"layers.0.w_gate_up", w_.layer.w_gate_up},
          {"layers.0.w_down", w_.layer.w_down}};
}

at::Tensor HeadTrainingModel::forward(const at::Tensor& tokens_in, const at::Tensor& features) const {
  check(tokens_in.dim() == 2 && tokens_in.scalar_type() == at::kLong,
        "HeadTrainingModel::forward: tokens must be int64 [batch, length]");
  const int64_t B = tokens_in.size(0), T = tokens_in.size(1);
  check(features.dim() == 3 && features.size(0) == B && features.size(1) == T &&
            features.size(2) == config_.hidden_size,
        "HeadTrainingModel::forward: features must be [batch, length, hidden_size]");
  check(T <= rope_.max_positions(), "HeadTrainingModel::forward: window of " + std::to_string(T) +
                                        " exceeds max_position_embeddings");
  const auto tokens = tokens_in.to(w_.fc.device());
  const auto [cos, sin] = rope_.at_positions(at::arange(T, tokens.options()));
  // Embedding first, then the feature, as EagleHead::run (cnets1: cat((inputs_embeds, hidden_states))).
  auto embedded = at::embedding(target_.weights().embed, tokens);
  auto x = at::matmul(at::cat({embedded, features.to(w_.fc.scalar_type())}, -1), w_.fc.t()) + w_.fc_bias;
  return training_decoder_layer(config_, w_.layer, x, cos, sin, causal_mask(T, w_.fc.options()),
                                /*input_norm=*/false);
}

HeadTrainingModel::Loss HeadTrainingModel::loss(const at::Tensor& windows_in, int64_t noise_seed,
                                                double cls_weight) const {
  check(windows_in.dim() == 2 && windows_in.size(1) >= 2, "head loss: windows must be [batch, length + 1]");
  const auto windows = windows_in.to(w_.fc.device());
  const int64_t T = windows.size(1) - 1;
  const at::Tensor& lm_head = target_.weights().lm_head;
  at::Tensor f, target_probs, target_top;
  {
    at::NoGradGuard no_grad;
    f = training_features(target_.config(), target_.weights(), target_rope_, windows);  // [B, T + 1, d]
    auto target_logits = at::matmul(f.narrow(1, 1, T), lm_head.t()).to(at::kFloat);
    target_probs = at::softmax(target_logits, -1);
    target_top = target_logits.argmax(-1);
  }
  auto inputs = f.narrow(1, 0, T);
  if (noise_seed >= 0) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(noise_seed));
    auto noise = (at::rand(inputs.sizes(), gen, at::TensorOptions().dtype(at::kFloat)) - 0.5) * 0.2;
    inputs = inputs + noise.to(inputs.device(), inputs.scalar_type());
  }
  auto predicted = forward(windows.narrow(1, 1, T), inputs);
  auto expected = f.narrow(1, 1, T);
  auto smooth = at::smooth_l1_loss(predicted.to(at::kFloat), expected.to(at::kFloat));
  auto logits = at::matmul(predicted, lm_head.t()).to(at::kFloat);
  auto soft_ce = -(target_probs * at::log_softmax(logits, -1)).sum(-1).mean();
  Loss out;
  out.loss = smooth + cls_weight * soft_ce;
  out.smooth_l1 = smooth.item<double>();
  out.soft_ce = soft_ce.item<double>();
  out.correct = logits.detach().argmax(-1).eq(target_top).sum().item<int64_t>();
  out.count = target_top.numel();
  return out;
}

std::unique_ptr<EagleHead> HeadTrainingModel::to_head() const {
  const ComputeOptions& o = target_.options();
  auto copy = [&](const at::Tensor& t) { return t.detach().to(o.device, o.dtype).clone(); };
  return std::make_unique<EagleHead>(config_, map_weights(w_, copy), target_);
}

HeadTrainingResult train_eagle_head(const LlamaModel& target, const HeadTrainingOptions& o, const TextDataset& data) {
  const int64_t max_context = target.config().max_position_embeddings - 1;
  check(o.batch > 0, "--batch: expected a positive number, got " + std::to_string(o.batch));
  check(o.context > 0 && o.context <= max_context,
        "--context: expected 1.." + std::to_string(max_context) + " (target windows are context + 1 tokens), got " +
            std::to_string(o.context));
  check(!o.out_dir.empty(), "--out: expected a directory");
  std::filesystem::create_directories(o.out_dir);
  const std::string state_path = o.out_dir + "/training_state.safetensors";

  HeadTrainingModel model(target, o.seed);
  const std::string config_text = model.config().to_hf_json().dump();
  TrainerOptions topt = o.trainer;
  topt.tokens_per_step = o.batch * o.context;
  Trainer trainer(model.parameters(), topt);
  const std::map<std::string, std::string> identity = {{"head_config", config_text},
                                                       {"seed", std::to_string(o.seed)},
                                                       {"batch", std::to_string(o.batch)},
                                                       {"context", std::to_string(o.context)}};
  if (o.resume) {
    if (!is_file(state_path)) throw Error("--resume: " + state_path + " not found");
    const auto meta = trainer.load_state(state_path);
    for (const auto& [key, value] : identity) {
      auto it = meta.find(key);
      if (it == meta.end() || it->second != value)
        throw Error::in_file(state_path, "metadata " + key, "'" + value + "' (this run's options)",
                             it == meta.end() ? "none" : "'" + it->second + "'");
    }
  }

  const at::Tensor val = data.validation_windows(o.context, o.eval_windows);
  HeadTrainingResult result;
  Trainer::Hooks hooks;
  hooks.loss = [&](int64_t step) {
    const auto windows = data.train_batch(o.batch, o.context, o.seed, step);
    // The noise of step s depends only on (seed, s), like its batch, so a resumed run is the same run.
    const int64_t noise_seed = static_cast<int64_t>((o.seed * 1000003ULL + static_cast<uint64_t>(step)) & 0x7fffffffffffULL);
    return model.loss(windows, noise_seed, o.cls_weight).loss;
  };
  hooks.eval_loss = [&] {
    at::NoGradGuard no_grad;
    double total = 0;
    int64_t correct = 0, count = 0;
    for (int64_t i = 0; i < val.size(0); i += o.batch) {
      const auto part = val.narrow(0, i, std::min(o.batch, val.size(0) - i));
      const auto l = model.loss(part, -1, o.cls_weight);
      total += l.loss.item<double>() * static_cast<double>(part.size(0));
      correct += l.correct;
      count += l.count;
    }
    const double accuracy = count ? static_cast<double>(correct) / static_cast<double>(count) : 0.0;
    result.eval_accuracy.push_back(accuracy);
    if (!o.trainer.quiet)
      std::fprintf(stderr, "\nvalidation at step %ld: top-1 accuracy %.4f\n", static_cast<long>(trainer.step()),
                   accuracy);
    return total / static_cast<double>(val.size(0));
  };
  hooks.save = [&](int64_t) {
    model.to_head()->save(o.out_dir, o.save_dtype);
    trainer.save_state(state_path, identity);
    std::map<std::string, std::string> attrs = identity;
    attrs["command_line"] = o.command_line;
    attrs["date"] = utc_timestamp();
    write_training_log(o.out_dir + "/training_log.h5", trainer.curves(), attrs);
  };
  trainer.run(hooks);

  for (const auto& [name, p] : model.parameters()) result.parameters += p.numel();
  result.tokens_per_second = trainer.tokens_per_second();
  result.curves = trainer.curves();
  return result;
}

}  // namespace draftlab
