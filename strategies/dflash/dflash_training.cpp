#include "strategies/dflash/dflash_training.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "strategies/pard/pard_training.h"

namespace draftlab {

namespace {

at::Tensor leaf(const at::Tensor& t) { return t.detach().to(at::kFloat).contiguous().clone(); }

}  // namespace

DFlashBlocks dflash_blocks_of(const at::Tensor& windows, const std::vector<int64_t>& anchors, int64_t B,
                              int64_t mask_token) {
  const int64_t rows = windows.size(0), C = windows.size(1), A = static_cast<int64_t>(anchors.size());
  DFlashBlocks b;
  b.anchors = anchors;
  std::vector<int64_t> positions;
  for (int64_t a : anchors)
    for (int64_t k = 0; k < B; ++k) positions.push_back(a + k);
  b.positions = at::tensor(positions, at::kLong);
  b.tokens = at::full({rows, A, B}, mask_token, at::kLong);
  b.tokens.select(2, 0).copy_(windows.index_select(1, at::tensor(anchors, at::kLong)));
  b.tokens = b.tokens.view({rows, A * B});
  b.mask = at::full({A * B, C + A * B}, -std::numeric_limits<float>::infinity(), at::kFloat);
  for (int64_t j = 0; j < A; ++j) {
    b.mask.narrow(0, j * B, B).narrow(1, 0, anchors[static_cast<size_t>(j)]).fill_(0.0f);  // context < anchor
    b.mask.narrow(0, j * B, B).narrow(1, C + j * B, B).fill_(0.0f);                        // its own block
  }
  return b;
}

DFlashTrainingModel::DFlashTrainingModel(const LlamaModel& target, uint64_t seed, const DFlashTrainingOptions& o)
    : target_(target),
      rope_(target.config(), target.options()),
      anchors_(o.anchors),
      gamma_(o.gamma),
      seed_(seed) {
  check(o.block_size >= 2 && o.block_size <= 64, "--block-size: expected 2..64, got " + std::to_string(o.block_size));
  check(o.anchors >= 1, "--anchors: expected 1 or more, got " + std::to_string(o.anchors));
  check(o.gamma > 0, "--gamma: expected a positive number, got " + std::to_string(o.gamma));
  const auto head = DFlashHead::random(target, seed, o.layers, o.block_size, o.mask_token);
  config_ = head->config();
  const DFlashWeights& h = head->weights();
  w_.fc = leaf(h.fc);
  w_.hidden_norm = leaf(h.hidden_norm);
  for (const DFlashLayerWeights& L : h.layers)
    w_.layers.push_back({leaf(L.attn_norm), leaf(L.wq), leaf(L.wk), leaf(L.wv), leaf(L.wo), leaf(L.q_norm),
                         leaf(L.k_norm), leaf(L.mlp_norm), leaf(L.w_gate), leaf(L.w_up), leaf(L.w_down)});
  w_.norm = leaf(h.norm);
}

std::vector<std::pair<std::string, at::Tensor>> DFlashTrainingModel::parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> p{{"fc", w_.fc}, {"hidden_norm", w_.hidden_norm}};
  for (size_t l = 0; l < w_.layers.size(); ++l) {
    const DFlashLayerWeights& L = w_.layers[l];
    const std::string n = "layers." + std::to_string(l) + ".";
    for (const auto& [name, t] : std::vector<std::pair<const char*, const at::Tensor*>>{
             {"attn_norm", &L.attn_norm}, {"wq", &L.wq}, {"wk", &L.wk}, {"wv", &L.wv}, {"wo", &L.wo},
             {"q_norm", &L.q_norm}, {"k_norm", &L.k_norm}, {"mlp_norm", &L.mlp_norm}, {"w_gate", &L.w_gate},
             {"w_up", &L.w_up}, {"w_down", &L.w_down}})
      p.emplace_back(n + name, *t);
  }
  p.emplace_back("norm", w_.norm);
  return p;
}

std::map<std::string, std::string> DFlashTrainingModel::identity() const {
  std::string ids;
  for (int64_t l : config_.target_layer_ids) ids += (ids.empty() ? "" : ",") + std::to_string(l);
  char gamma[32];
  std::snprintf(gamma, sizeof gamma, "%.17g", gamma_);
  return {{"head_config", config_.layers.to_hf_json().dump()}, {"block_size", std::to_string(config_.block_size)},
          {"mask_token", std::to_string(config_.mask_token)},  {"target_layer_ids", ids},
          {"anchors", std::to_string(anchors_)},               {"gamma", gamma}};
}

std::vector<int64_t> DFlashTrainingModel::anchors_for(int64_t T, uint64_t seed) const {
  // Anchors 1 .. T + 1 - B: a context of at least one position, and the block's labels inside the window.
  const int64_t last = T + 1 - config_.block_size;
  std::vector<int64_t> all;
  for (int64_t a = 1; a <= last; ++a) all.push_back(a);
  std::mt19937_64 random(seed);
  std::shuffle(all.begin(), all.end(), random);
  all.resize(static_cast<size_t>(std::min<int64_t>(anchors_, static_cast<int64_t>(all.size()))));
  std::sort(all.begin(), all.end());
  return all;
}

at::Tensor DFlashTrainingModel::block_logits(const HeadBatch& batch, const std::vector<int64_t>& anchors) const {
  const at::Tensor& windows = batch.windows;
  const int64_t rows = windows.size(0), C = windows.size(1), B = config_.block_size, A = static_cast<int64_t>(anchors.size());
  const int64_t d = config_.layers.hidden_size, k = static_cast<int64_t>(config_.target_layer_ids.size());
  check(batch.features.dim() == 3 && batch.features.size(1) == C && batch.features.size(2) >= k * d,
        "DFlash training: features must be [batch, length + 1, >= " + std::to_string(k * d) + "]");
  const auto device = w_.fc.device();
  const DFlashBlocks blocks = dflash_blocks_of(windows.to(at::kCPU), anchors, B, config_.mask_token);
  std::vector<at::Tensor> keys, values;
  const auto context_positions = at::arange(C, at::TensorOptions().dtype(at::kLong).device(device));
  dflash_context(config_, w_, rope_, batch.features.narrow(2, 0, k * d).to(device, at::kFloat), context_positions,
                 keys, values);
  at::Tensor embeddings;
  {
    at::NoGradGuard no_grad;
    embeddings = at::embedding(target_.embedding(), blocks.tokens.to(device)).to(at::kFloat);
  }
  const auto hidden = dflash_blocks(config_, w_, rope_, embeddings, blocks.positions.to(device), keys, values,
                                    blocks.mask.to(device));
  const auto slots = hidden.view({rows, A, B, d}).narrow(2, 1, B - 1);
  return at::matmul(slots, target_.lm_head().to(at::kFloat).t());  // the frozen target's head
}

DFlashTrainingModel::Loss DFlashTrainingModel::block_loss(const HeadBatch& batch, const std::vector<int64_t>& anchors,
                                                          bool counts) const {
  const at::Tensor& windows = batch.windows;
  const int64_t rows = windows.size(0), B = config_.block_size, A = static_cast<int64_t>(anchors.size());
  const auto device = w_.fc.device();
  const at::Tensor logits = block_logits(batch, anchors);  // [rows, A, B - 1, V]
  // Labels: token a + k at slot k; weight exp(-(k - 1) / gamma), times the loss mask at the label.
  std::vector<int64_t> label_index;
  for (int64_t a : anchors)
    for (int64_t k = 1; k < B; ++k) label_index.push_back(a + k);
  const auto index = at::tensor(label_index, at::kLong);
  const auto labels = windows.to(at::kCPU).index_select(1, index).view({rows, A, B - 1}).to(device);
  auto weight = at::exp(-(at::arange(B - 1, at::TensorOptions().dtype(at::kFloat)) / gamma_)).to(device);
  at::Tensor counted = at::ones({rows, A, B - 1}, at::TensorOptions().dtype(at::kFloat).device(device));
  if (batch.mask.defined())
    counted = batch.mask.to(at::kCPU).index_select(1, index).view({rows, A, B - 1}).to(device, at::kFloat).ne(0).to(at::kFloat);
  const auto ce = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}),
                                         {}, at::Reduction::None).view({rows, A, B - 1});
  // Over the whole step's rows (the parts' losses add up to the step's).
  const double denominator = static_cast<double>(batch.rows_in_step() * A) * weight.sum().item<double>();
  Loss out;
  out.loss = (ce * counted * weight).sum() / denominator;
  if (counts) {
    at::NoGradGuard no_grad;
    const auto agree = logits.argmax(-1).eq(labels).logical_and(counted.ne(0));
    auto alive = at::ones({rows, A}, at::TensorOptions().dtype(at::kBool).device(device));
    for (int64_t k = 0; k < B - 1; ++k) {
      const auto tried = alive.logical_and(counted.select(2, k).ne(0));
      alive = tried.logical_and(agree.select(2, k));
      out.tried.push_back(tried.sum().item<int64_t>());
      out.agreed.push_back(alive.sum().item<int64_t>());
    }
  }
  return out;
}

at::Tensor DFlashTrainingModel::loss(const HeadBatch& batch, int64_t step) const {
  const int64_t T = batch.windows.size(1) - 1;
  return block_loss(batch, anchors_for(T, seed_ * 1000003ull + static_cast<uint64_t>(step)), false).loss;
}

HeadEvaluation DFlashTrainingModel::evaluate(const HeadBatch& batch) const {
  const int64_t T = batch.windows.size(1) - 1;
  const Loss l = block_loss(batch, anchors_for(T, 0), true);  // the same anchors every pass
  HeadEvaluation e;
  e.loss = l.loss.item<double>();
  e.counts["accuracy"] = {{l.agreed[0], l.tried[0]}};
  for (size_t k = 0; k < l.agreed.size() && k < 8; ++k) e.counts["alpha"].emplace_back(l.agreed[k], l.tried[k]);
  return e;
}

std::unique_ptr<DFlashHead> DFlashTrainingModel::to_head() const {
  const ComputeOptions& o = target_.options();
  auto copy = [&](const at::Tensor& t) { return t.detach().to(o.device, o.dtype).clone(); };
  DFlashWeights w;
  w.fc = copy(w_.fc);
  w.hidden_norm = copy(w_.hidden_norm);
  for (const DFlashLayerWeights& L : w_.layers)
    w.layers.push_back({copy(L.attn_norm), copy(L.wq), copy(L.wk), copy(L.wv), copy(L.wo), copy(L.q_norm),
                        copy(L.k_norm), copy(L.mlp_norm), copy(L.w_gate), copy(L.w_up), copy(L.w_down)});
  w.norm = copy(w_.norm);
  return std::make_unique<DFlashHead>(config_, std::move(w), target_);
}

void DFlashTrainingModel::save(const std::string& dir, at::ScalarType file_dtype) const {
  to_head()->save(dir, file_dtype);
}

HeadTrainingResult train_dflash_head(const LlamaModel& target, const DFlashTrainingOptions& o, const TextDataset& data) {
  DFlashTrainingOptions options = o;
  if (options.mask_token < 0) options.mask_token = unused_token(data.token_counts(target.config().vocab_size));
  DFlashTrainingModel model(target, o.seed, options);
  return train_draft_head(target, model, options, data);
}

}  // namespace draftlab
