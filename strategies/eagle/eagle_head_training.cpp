#include "strategies/eagle/eagle_head_training.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/safetensors.h"
#include "core/io/tensor_entry.h"
#include "core/model/training_forward.h"
#include "core/training/draft_vocabulary.h"

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

// Which head rows count under a window loss mask [B, T + 1]: row i predicts the distribution of w_{i+2}, so it
// counts iff mask[i + 2]; the last row's token lies past the window and takes mask[T]. The official recipe counts
// row i iff mask[i] (its train/main.py aligns the mask with the row's input). Returns [B, T] float 0/1.
at::Tensor row_mask(const at::Tensor& loss_mask, int64_t B, int64_t T, bool official) {
  check(loss_mask.dim() == 2 && loss_mask.size(0) == B && loss_mask.size(1) == T + 1,
        "head loss: loss_mask must be [batch, length + 1] = [" + std::to_string(B) + ", " + std::to_string(T + 1) +
            "], got " + shape_string(loss_mask.sizes().vec()));
  const auto m = loss_mask.to(at::kCPU).ne(0).to(at::kFloat);
  if (official) return m.narrow(1, 0, T).clone();
  if (T == 1) return m.narrow(1, 1, 1).clone();
  return at::cat({m.narrow(1, 2, T - 1), m.narrow(1, T, 1)}, 1);
}


}  // namespace

HeadTrainingModel::HeadTrainingModel(const LlamaModel& target, uint64_t seed, std::string input_variant, at::Tensor d2t)
    : target_(target),
      seed_(seed),
      config_(EagleHead::config_for(target.config())),
      target_rope_(target.config(), target.options()),
      rope_(config_, target.options()),
      input_variant_(std::move(input_variant)) {
  const auto head = EagleHead::random(target, seed, input_variant_, d2t);  // checks the variant and d2t
  w_ = map_weights(head->weights(), leaf);
  if (head->d2t().defined()) {
    d2t_ = head->d2t();
    draft_lm_head_ = target.weights().lm_head.index_select(0, d2t_.to(target.weights().lm_head.device())).contiguous();
  }
}

HeadTrainingModel::ChainAcceptance& HeadTrainingModel::ChainAcceptance::operator+=(const ChainAcceptance& o) {
  for (int n = 0; n < kAlphaSteps; ++n) {
    agreed[n] += o.agreed[n], tried[n] += o.tried[n];
    official_hits[n] += o.official_hits[n], official_tries[n] += o.official_tries[n];
  }
  return *this;
}

at::Tensor HeadTrainingModel::row_tokens(const at::Tensor& windows) const {
  const int64_t T = windows.size(1) - 1;
  return windows.narrow(1, eagle_row_token_is_unshifted(input_variant_) ? 0 : 1, T);
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
  // The variant's fc input, as EagleHead::run (two-input: embedding first, cnets1's cat((inputs_embeds, hidden))).
  auto embedded = at::embedding(target_.weights().embed, tokens);
  auto x = at::matmul(eagle_fc_input(input_variant_, embedded, features.to(w_.fc.scalar_type())), w_.fc.t()) + w_.fc_bias;
  return training_decoder_layer(config_, w_.layer, x, cos, sin, causal_mask(T, w_.fc.options()),
                                /*input_norm=*/false);
}

HeadTrainingModel::Loss HeadTrainingModel::loss(const at::Tensor& windows_in, int64_t noise_seed, double cls_weight,
                                                const at::Tensor& loss_mask, const at::Tensor& target_features,
                                                const StepShare& share) const {
  check(windows_in.dim() == 2 && windows_in.size(1) >= 2, "head loss: windows must be [batch, length + 1]");
  const auto windows = windows_in.to(w_.fc.device());
  const int64_t B = windows.size(0), T = windows.size(1) - 1, d = config_.hidden_size;
  const at::Tensor& lm_head = target_.weights().lm_head;
  // float32 losses (bf16 heads upcast); float64 heads stay float64, so gradients can be checked numerically.
  const at::ScalarType loss_type = w_.fc.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor f, target_probs, target_top;
  {
    at::NoGradGuard no_grad;
    if (target_features.defined()) {
      check(target_features.dim() == 3 && target_features.size(0) == B && target_features.size(1) == T + 1 &&
                target_features.size(2) == d,
            "head loss: target_features must be [batch, length + 1, hidden_size] = [" + std::to_string(B) + ", " +
                std::to_string(T + 1) + ", " + std::to_string(d) + "], got " +
                shape_string(target_features.sizes().vec()));
      f = target_features.to(w_.fc.device(), w_.fc.scalar_type());
    } else {
      f = training_features(target_.config(), target_.weights(), target_rope_, windows);  // [B, T + 1, d]
    }
    auto target_logits = at::matmul(f.narrow(1, 1, T), lm_head.t()).to(loss_type);
    // A reduced head learns the target's distribution restricted to its vocabulary and renormalised (softmax of
    // the target's logits at the kept ids); accuracy below still compares with the full-vocabulary argmax.
    target_probs = at::softmax(d2t_.defined() ? target_logits.index_select(-1, d2t_.to(target_logits.device()))
                                              : target_logits, -1);
    target_top = target_logits.argmax(-1);
  }
  auto inputs = f.narrow(1, 0, T);
  if (noise_seed >= 0) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(noise_seed));
    // U(-0.1, 0.1); the official recipe scales it by 512 / L (L: the sequence length, here the window's T).
    const double scale = official_recipe_ ? 0.2 * 512.0 / static_cast<double>(T) : 0.2;
    // A share of a step draws the whole step's noise and keeps its rows: the same noise as one process.
    auto noise = share.partial()
                     ? at::rand({share.step_rows, T, d}, gen, at::TensorOptions().dtype(at::kFloat)).narrow(0, share.first_row, B)
                     : at::rand(inputs.sizes(), gen, at::TensorOptions().dtype(at::kFloat));
    noise = (noise - 0.5) * scale;
    inputs = inputs + noise.to(inputs.device(), inputs.scalar_type());
  }
  auto predicted = forward(row_tokens(windows), inputs);
  auto expected = f.narrow(1, 1, T);
  auto logits = at::matmul(predicted, (d2t_.defined() ? draft_lm_head_ : lm_head).t()).to(loss_type);
  // The head's top-1 as target ids.
  auto top1 = [&] {
    auto index = logits.detach().argmax(-1);
    return d2t_.defined() ? d2t_.to(index.device()).index_select(0, index.flatten()).view_as(index) : index;
  };
  Loss out;
  at::Tensor smooth, soft_ce;
  if (share.partial()) {
    // This share's sums over the whole step's count: the parts' losses add up to the step's mean.
    const at::Tensor step_rows =
        share.step_mask.defined() ? row_mask(share.step_mask, share.step_rows, T, official_recipe_) : at::Tensor();
    const at::Tensor rows = loss_mask.defined() ? row_mask(loss_mask, B, T, official_recipe_).to(logits.device(), loss_type)
                                                : at::ones({B, T}, logits.options().dtype(loss_type));
    const double denominator =
        step_rows.defined() ? std::max(step_rows.sum().item<double>(), 1.0) : static_cast<double>(share.step_rows * T);
    auto per_element = at::smooth_l1_loss(predicted.to(loss_type), expected.to(loss_type), at::Reduction::None);
    smooth = (per_element.mean(-1) * rows).sum() / denominator;
    soft_ce = (-(target_probs * at::log_softmax(logits, -1)).sum(-1) * rows).sum() / denominator;
    const at::Tensor agree = top1().eq(target_top).to(at::kFloat) * rows.to(at::kFloat);
    out.correct = static_cast<int64_t>(agree.sum().item<double>());
    out.count = static_cast<int64_t>(rows.sum().item<double>());
  } else if (!loss_mask.defined()) {
    smooth = at::smooth_l1_loss(predicted.to(loss_type), expected.to(loss_type));
    soft_ce = -(target_probs * at::log_softmax(logits, -1)).sum(-1).mean();
    out.correct = top1().eq(target_top).sum().item<int64_t>();
    out.count = target_top.numel();
  } else {
    const at::Tensor rows = row_mask(loss_mask, B, T, official_recipe_).to(logits.device(), loss_type);  // [B, T] float 0/1
    const at::Tensor counted = rows.sum();
    const at::Tensor denominator = at::clamp_min(counted, 1.0);
    auto per_element = at::smooth_l1_loss(predicted.to(loss_type), expected.to(loss_type), at::Reduction::None);
    smooth = (per_element.mean(-1) * rows).sum() / denominator;
    soft_ce = (-(target_probs * at::log_softmax(logits, -1)).sum(-1) * rows).sum() / denominator;
    const at::Tensor agree = top1().eq(target_top).to(at::kFloat) * rows;
    out.correct = static_cast<int64_t>(agree.sum().item<double>());
    out.count = static_cast<int64_t>(counted.item<double>());
  }
  out.loss = smooth + cls_weight * soft_ce;
  out.smooth_l1 = smooth.item<double>();
  out.soft_ce = soft_ce.item<double>();
  return out;
}

std::unique_ptr<EagleHead> HeadTrainingModel::to_head() const {
  const ComputeOptions& o = target_.options();
  auto copy = [&](const at::Tensor& t) { return t.detach().to(o.device, o.dtype).clone(); };
  return std::make_unique<EagleHead>(config_, map_weights(w_, copy), target_, input_variant_, d2t_);
}

HeadTrainingModel::ChainAcceptance HeadTrainingModel::chain_acceptance(const at::Tensor& windows_in,
                                                                       const at::Tensor& loss_mask,
                                                                       const at::Tensor& target_features) const {
  check(windows_in.dim() == 2 && windows_in.size(1) >= 2, "chain acceptance: windows must be [batch, length + 1]");
  at::NoGradGuard no_grad;
  const auto head = to_head();
  const auto windows = windows_in.to(at::kCPU);
  const int64_t B = windows.size(0), T = windows.size(1) - 1, d = config_.hidden_size;
  at::Tensor f;
  if (target_features.defined()) {
    check(target_features.dim() == 3 && target_features.size(0) == B && target_features.size(1) == T + 1 &&
              target_features.size(2) == d,
          "chain acceptance: target_features must be [batch, length + 1, hidden_size], got " +
              shape_string(target_features.sizes().vec()));
    f = target_features;
  } else {
    f = training_features(target_.config(), target_.weights(), target_rope_, windows.to(w_.fc.device()));
  }
  // target_top[b][j]: the target's argmax from f_j, i.e. its choice of w_{j+1}. Row r predicts f_{r+1}: its token
  // is compared with target_top[r + 1].
  const auto target_top =
      at::matmul(f.to(w_.fc.scalar_type()), target_.weights().lm_head.t()).argmax(-1).to(at::kCPU);
  const auto rows = (loss_mask.defined() ? row_mask(loss_mask, B, T, official_recipe_) : at::ones({B, T})).ne(0);  // [B, T] bool
  const auto tokens = row_tokens(windows);
  // greedy[b][r]: row r's window token w_{r+1} is the target's argmax from f_r (getkacc's condition to go on).
  const auto greedy = target_top.narrow(1, 0, T).eq(windows.narrow(1, 1, T)).logical_and(rows);
  ChainAcceptance out;
  // getkacc's counts from this step's agreement `hit` [m] of starts 0..m-1: `going` are the starts still running.
  auto count_official = [&](int n, const at::Tensor& ok, const at::Tensor& hit, at::Tensor& going) {
    const int64_t m = hit.size(0);
    const auto tried = going.narrow(0, 0, m).logical_and(ok);
    const auto missed = tried.logical_and(hit.logical_not()).sum().item<int64_t>();
    out.official_tries[n] += tried.sum().item<int64_t>();
    out.official_hits[n] += tried.logical_and(hit).sum().item<int64_t>();
    for (int k = n + 1; k < kAlphaSteps; ++k) out.official_tries[k] += missed;  // a miss counts at every later step
    going = tried.logical_and(hit);
  };
  for (int64_t b = 0; b < B; ++b) {
    // Cache rows: the T true rows, then step n's rollout rows (one per start i = 0..T-1-n) at base[n] + i.
    std::vector<int64_t> base(kAlphaSteps, 0);
    int64_t capacity = T;
    for (int n = 1; n < kAlphaSteps && n < T; ++n) base[n] = capacity, capacity += T - n;
    KvCache cache = head->make_cache(capacity);
    at::Tensor prev = head->forward(cache, tokens[b], f[b].narrow(0, 0, T), at::arange(T, at::kLong));
    auto top = head->logits(prev).argmax(-1).to(at::kCPU);
    at::Tensor alive = top.eq(target_top[b].narrow(0, 1, T)).logical_and(rows[b]);  // [T]: agreed so far
    out.tried[0] += rows[b].sum().item<int64_t>();
    out.agreed[0] += alive.sum().item<int64_t>();
    at::Tensor going = at::ones({T}, at::kBool);
    count_official(0, greedy[b], top.eq(target_top[b].narrow(0, 1, T)), going);
    for (int n = 1; n < kAlphaSteps && n < T; ++n) {
      const int64_t m = T - n, len = cache.length();  // starts i = 0..m-1 at positions i + n
      auto visible = at::zeros({m, len + m}, at::kBool);
      auto v = visible.accessor<bool, 2>();
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t r = 0; r <= i; ++r) v[i][r] = true;            // true rows 0..i
        for (int k = 1; k < n; ++k) v[i][base[k] + i] = true;       // this rollout's earlier steps
        v[i][len + i] = true;                                       // itself
      }
      // Row i + n reads the window's token and the rollout's own prediction of f_{i+n} (the previous step's output).
      prev = head->forward_visible(cache, tokens[b].narrow(0, n, m), prev.narrow(0, 0, m),
                                   at::arange(n, T, at::kLong), visible);
      top = head->logits(prev).argmax(-1).to(at::kCPU);
      const auto tried = alive.narrow(0, 0, m).logical_and(rows[b].narrow(0, n, m));
      alive = tried.logical_and(top.eq(target_top[b].narrow(0, n + 1, m)));
      out.tried[n] += tried.sum().item<int64_t>();
      out.agreed[n] += alive.sum().item<int64_t>();
      count_official(n, greedy[b].narrow(0, n, m), top.eq(target_top[b].narrow(0, n + 1, m)), going);
    }
  }
  return out;
}

std::map<std::string, std::string> HeadTrainingModel::identity() const {
  return {{"head_config", config_.to_hf_json().dump()},
          {"input", input_variant_},
          {"draft_vocab", std::to_string(d2t_.defined() ? d2t_.size(0) : 0)},
          {"recipe", official_recipe_ ? "official" : "paper"}};
}

std::string HeadTrainingModel::identity_default(const std::string& key) const {
  // States written before the input variants and draft vocabularies existed were the defaults.
  if (key == "input") return kEagleInputFeatureShiftedToken;
  if (key == "draft_vocab") return "0";
  if (key == "recipe") return "paper";
  return "";
}

at::Tensor HeadTrainingModel::batch_mask(const HeadBatch& batch) const {
  if (!official_recipe_ || !batch.lengths.defined() || !batch.mask.defined()) return batch.mask;
  // The official rule counts row i by mask[i]; the row of a padded row's last real token would learn the
  // features of the padding after it, so that token's mask is cleared (row i predicts f_{i+1}: it needs i + 1 real).
  auto m = batch.mask.clone();
  const auto lengths = batch.lengths.to(at::kCPU);
  for (int64_t b = 0; b < m.size(0); ++b) m[b][lengths[b].item<int64_t>() - 1].zero_();
  return m;
}

at::Tensor HeadTrainingModel::loss(const HeadBatch& batch, int64_t step) const {
  // The noise of step s depends only on (seed, s), like its batch, so a resumed run is the same run.
  const int64_t noise_seed = static_cast<int64_t>((seed_ * 1000003ULL + static_cast<uint64_t>(step)) & 0x7fffffffffffULL);
  StepShare share = batch.share;
  if (share.partial()) share.step_mask = batch_mask({{}, share.step_mask, {}, share.step_lengths});
  return loss(batch.windows, noise_seed, cls_weight_, batch_mask(batch), batch.features, share).loss;
}

HeadEvaluation HeadTrainingModel::evaluate(const HeadBatch& batch) const {
  const at::Tensor mask = batch_mask(batch);
  const Loss l = loss(batch.windows, -1, cls_weight_, mask, batch.features);
  const ChainAcceptance a = chain_acceptance(batch.windows, mask, batch.features);
  HeadEvaluation e;
  e.loss = l.loss.item<double>();
  e.counts["accuracy"] = {{l.correct, l.count}};
  for (int n = 0; n < kAlphaSteps; ++n) {
    e.counts["alpha"].emplace_back(a.agreed[n], a.tried[n]);
    e.counts["alpha_official"].emplace_back(a.official_hits[n], a.official_tries[n]);
  }
  return e;
}

void HeadTrainingModel::save(const std::string& dir, at::ScalarType file_dtype) const {
  to_head()->save(dir, file_dtype);
}

HeadTrainingResult train_eagle_head(const LlamaModel& target, const EagleHeadTrainingOptions& o,
                                    const TextDataset& data) {
  check(is_eagle_input(o.input), "--input: expected one of " + eagle_input_names() + ", got '" + o.input + "'");
  check(o.draft_vocab >= 0, "--draft-vocab: expected 0 or more, got " + std::to_string(o.draft_vocab));
  const at::Tensor d2t =
      training_draft_vocabulary(data, o, target.config().vocab_size, o.draft_vocab, DraftVocabularyCount::RealTokens);
  HeadTrainingModel model(target, o.seed, o.input, d2t);
  model.set_cls_weight(o.cls_weight);
  check_recipe(o.recipe);
  model.set_official_recipe(o.recipe == "official");
  EagleHeadTrainingOptions run = o;
  run.trainer.clip_by_value = o.recipe == "official";
  return train_draft_head(target, model, run, data);
}

}  // namespace draftlab
