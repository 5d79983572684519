#include "strategies/hydra/hydra_training.h"

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/io/tensor_entry.h"

namespace draftlab {

namespace {

// w with `f` applied to every tensor (undefined ones stay undefined).
template <class F>
HydraHeadWeights map_weights(const HydraHeadWeights& w, F f) {
  auto map = [&](const HydraHeadWeights::Linear& l) {
    return l.weight.defined() ? HydraHeadWeights::Linear{f(l.weight), f(l.bias)} : HydraHeadWeights::Linear{};
  };
  HydraHeadWeights out;
  for (const auto& h : w.heads) {
    HydraHeadWeights::Head c{map(h.input), map(h.residual), {}, map(h.lm_head)};
    for (const auto& b : h.blocks) c.blocks.push_back(map(b));
    out.heads.push_back(std::move(c));
  }
  return out;
}

}  // namespace

HydraTrainingModel::HydraTrainingModel(const LlamaModel& target, uint64_t seed, HydraConfig config)
    : target_(target), config_(config) {
  const auto heads = HydraHeads::random(target, seed, config_, /*weight_std=*/0.0);
  w_ = map_weights(heads->weights(), [](const at::Tensor& t) { return t.detach().contiguous().clone(); });
}

std::vector<std::pair<std::string, at::Tensor>> HydraTrainingModel::parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> p;
  auto add = [&](const std::string& name, const HydraHeadWeights::Linear& l) {
    if (!l.weight.defined()) return;
    p.emplace_back(name + ".weight", l.weight);
    p.emplace_back(name + ".bias", l.bias);
  };
  for (size_t k = 0; k < w_.heads.size(); ++k) {
    const std::string head = "head." + std::to_string(k) + ".";
    add(head + "input", w_.heads[k].input);
    add(head + "residual", w_.heads[k].residual);
    for (size_t j = 0; j < w_.heads[k].blocks.size(); ++j) add(head + "block" + std::to_string(j), w_.heads[k].blocks[j]);
    add(head + "lm_head", w_.heads[k].lm_head);
  }
  return p;
}

std::vector<at::Tensor> HydraTrainingModel::logits(const at::Tensor& windows, const at::Tensor& features) const {
  const int64_t d = target_.config().hidden_size;
  check(windows.dim() == 2 && features.dim() == 3 && features.size(0) == windows.size(0) &&
            features.size(1) == windows.size(1) && features.size(2) == d,
        "HydraTrainingModel::logits: expected windows [B, T + 1] and features [B, T + 1, " + std::to_string(d) +
            "], got " + shape_string(windows.sizes().vec()) + " and " + shape_string(features.sizes().vec()));
  const int64_t B = windows.size(0), T = windows.size(1) - 1;
  check(T > config_.num_heads, "HydraTrainingModel::logits: windows of " + std::to_string(T + 1) + " tokens leave no " +
                                   "label for head " + std::to_string(config_.num_heads - 1) + " (expected more than " +
                                   std::to_string(config_.num_heads + 1) + ")");
  const at::Tensor& w0 = w_.heads[0].input.weight;
  const at::Tensor f = features.to(w0.device(), w0.scalar_type());
  at::Tensor embedded;  // [B, T + 1, d]: the frozen target embedding of every window token
  {
    at::NoGradGuard no_grad;
    embedded = target_.weights().embed.index_select(0, windows.to(w0.device()).reshape({-1}))
                   .to(w0.scalar_type()).reshape({B, T + 1, d});
  }
  std::vector<at::Tensor> out;
  for (int64_t k = 0; k < config_.num_heads; ++k) {
    const int64_t n = T - k - 1;  // rows i = 0 .. T - k - 2
    std::vector<at::Tensor> tokens;  // w_{i+1} .. w_{i+k+1}
    for (int64_t j = 1; j <= k + 1; ++j) tokens.push_back(embedded.narrow(1, j, n));
    out.push_back(hydra_head_logits(w_, k, f.narrow(1, 0, n), at::cat(tokens, -1), target_.weights().lm_head));
  }
  return out;
}

std::string HydraTrainingModel::config_json() const {
  return nlohmann::json{{"hydra_num_heads", config_.num_heads},
                        {"hydra_num_layers", config_.num_layers},
                        {"draftlab_lm_head", config_.own_lm_head ? "own" : "shared"}}
      .dump();
}

std::unique_ptr<HydraHeads> HydraTrainingModel::to_heads() const {
  const ComputeOptions& o = target_.options();
  return std::make_unique<HydraHeads>(
      config_, map_weights(w_, [&](const at::Tensor& t) { return t.detach().to(o.device, o.dtype).clone(); }), target_);
}

void HydraTrainingModel::save(const std::string& dir, at::ScalarType file_dtype) const {
  to_heads()->save(dir, file_dtype);
}

}  // namespace draftlab
