#include "strategies/medusa/medusa_training.h"

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/io/tensor_entry.h"

namespace draftlab {

namespace {

// w with `f` applied to every tensor.
template <class F>
MedusaHeadWeights map_weights(const MedusaHeadWeights& w, F f) {
  MedusaHeadWeights out;
  for (const auto& blocks : w.blocks) {
    out.blocks.emplace_back();
    for (const auto& b : blocks) out.blocks.back().push_back({f(b.weight), f(b.bias)});
  }
  for (const auto& lm : w.lm_heads) out.lm_heads.push_back(f(lm));
  return out;
}

}  // namespace

MedusaTrainingModel::MedusaTrainingModel(const LlamaModel& target, uint64_t seed, MedusaConfig config)
    : target_(target), config_(config) {
  const auto heads = MedusaHeads::random(target, seed, config_, /*weight_std=*/0.0);
  w_ = map_weights(heads->weights(), [](const at::Tensor& t) { return t.detach().contiguous().clone(); });
}

std::vector<std::pair<std::string, at::Tensor>> MedusaTrainingModel::parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> p;
  for (size_t k = 0; k < w_.blocks.size(); ++k) {
    const std::string head = "head." + std::to_string(k) + ".";
    for (size_t j = 0; j < w_.blocks[k].size(); ++j) {
      p.emplace_back(head + std::to_string(j) + ".weight", w_.blocks[k][j].weight);
      p.emplace_back(head + std::to_string(j) + ".bias", w_.blocks[k][j].bias);
    }
    if (!w_.lm_heads.empty()) p.emplace_back(head + "lm_head", w_.lm_heads[k]);
  }
  return p;
}

std::vector<at::Tensor> MedusaTrainingModel::logits(const at::Tensor& windows, const at::Tensor& features) const {
  check(windows.dim() == 2 && features.dim() == 3 && features.size(0) == windows.size(0) &&
            features.size(1) == windows.size(1) && features.size(2) == target_.config().hidden_size,
        "MedusaTrainingModel::logits: expected windows [B, T + 1] and features [B, T + 1, " +
            std::to_string(target_.config().hidden_size) + "], got " + shape_string(windows.sizes().vec()) + " and " +
            shape_string(features.sizes().vec()));
  const int64_t T = windows.size(1) - 1;
  check(T > config_.num_heads, "MedusaTrainingModel::logits: windows of " + std::to_string(T + 1) + " tokens leave no " +
                                   "label for head " + std::to_string(config_.num_heads - 1) + " (expected more than " +
                                   std::to_string(config_.num_heads + 1) + ")");
  const at::Tensor& w0 = w_.blocks.empty() || w_.blocks[0].empty() ? target_.weights().lm_head : w_.blocks[0][0].weight;
  const at::Tensor f = features.to(w0.device(), w0.scalar_type());
  std::vector<at::Tensor> out;
  for (int64_t k = 0; k < config_.num_heads; ++k)
    out.push_back(medusa_head_logits(w_, k, f.narrow(1, 0, T - k - 1), target_.weights().lm_head));
  return out;
}

std::string MedusaTrainingModel::config_json() const {
  return nlohmann::json{{"medusa_num_heads", config_.num_heads},
                        {"medusa_num_layers", config_.num_layers},
                        {"draftlab_lm_head", config_.own_lm_head ? "own" : "shared"}}
      .dump();
}

std::unique_ptr<MedusaHeads> MedusaTrainingModel::to_heads() const {
  const ComputeOptions& o = target_.options();
  return std::make_unique<MedusaHeads>(
      config_, map_weights(w_, [&](const at::Tensor& t) { return t.detach().to(o.device, o.dtype).clone(); }), target_);
}

void MedusaTrainingModel::save(const std::string& dir, at::ScalarType file_dtype) const {
  to_heads()->save(dir, file_dtype);
}

}  // namespace draftlab
