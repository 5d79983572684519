#include "strategies/peagle/peagle_training.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/model/llama_layer.h"
#include "core/training/draft_vocabulary.h"
#include "strategies/eagle3/eagle3_head.h"
#include "strategies/pard/pard_training.h"

namespace draftlab {

namespace {

at::Tensor leaf(const at::Tensor& t) { return t.detach().to(at::kFloat).contiguous().clone(); }

// The head's RoPE table, as PEagleHead builds it (positions past the target's context for the last slots).
ModelConfig rope_config(const PEagleConfig& c, const ModelConfig& target) {
  ModelConfig r = c.layers;
  r.max_position_embeddings = std::max(r.max_position_embeddings, target.max_position_embeddings) + 64;
  return r;
}

template <class F>
PEagleWeights map_weights(const PEagleWeights& w, F f) {
  PEagleWeights o;
  if (w.embed.defined()) o.embed = f(w.embed);
  o.fc = f(w.fc);
  o.mask_hidden = f(w.mask_hidden);
  for (const PEagleLayerWeights& L : w.layers) {
    PEagleLayerWeights M;
    M.input_norm = f(L.input_norm);
    if (L.hidden_norm.defined()) M.hidden_norm = f(L.hidden_norm);
    for (auto [to, from] : std::vector<std::pair<at::Tensor*, const at::Tensor*>>{
             {&M.wq, &L.wq}, {&M.wk, &L.wk}, {&M.wv, &L.wv}, {&M.wo, &L.wo}, {&M.mlp_norm, &L.mlp_norm},
             {&M.w_gate, &L.w_gate}, {&M.w_up, &L.w_up}, {&M.w_down, &L.w_down}})
      *to = f(*from);
    o.layers.push_back(std::move(M));
  }
  o.norm = f(w.norm);
  o.lm_head = f(w.lm_head);
  return o;
}

}  // namespace

PEagleRows peagle_cod_rows(int64_t T, int64_t depths, double ratio, double ratio_min, uint64_t seed) {
  PEagleRows rows;
  std::vector<int64_t> kept;
  for (int64_t a = 0; a < T; ++a) {
    kept.push_back(a);
    rows.anchor.push_back(a);
    rows.depth.push_back(0);
  }
  std::mt19937_64 random(seed);
  for (int64_t d = 1; d < depths; ++d) {
    std::vector<int64_t> eligible;
    for (int64_t a : kept)
      if (a + d <= T - 1) eligible.push_back(a);
    const double share = std::max(std::pow(ratio, static_cast<double>(d)), ratio_min);
    const auto size = std::min<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(T - d) * share + 1e-9)),
                                        static_cast<int64_t>(eligible.size()));
    if (size <= 0) break;
    if (static_cast<int64_t>(eligible.size()) > size) {
      std::shuffle(eligible.begin(), eligible.end(), random);
      eligible.resize(static_cast<size_t>(size));
      std::sort(eligible.begin(), eligible.end());
    }
    kept = eligible;
    for (int64_t a : kept) {
      rows.anchor.push_back(a);
      rows.depth.push_back(d);
    }
  }
  return rows;
}

at::Tensor peagle_row_mask(const PEagleRows& rows) {
  const auto A = at::tensor(rows.anchor, at::kLong), D = at::tensor(rows.depth, at::kLong);
  const auto qa = A.unsqueeze(1), ka = A.unsqueeze(0), qd = D.unsqueeze(1), kd = D.unsqueeze(0);
  const auto visible = kd.eq(0).logical_and(ka.le(qa)).logical_or(ka.eq(qa).logical_and(kd.le(qd)));
  return at::zeros(visible.sizes(), at::kFloat).masked_fill(visible.logical_not(), -std::numeric_limits<float>::infinity());
}

PEagleTrainingModel::PEagleTrainingModel(const LlamaModel& target, uint64_t seed, at::Tensor draft_ids,
                                         const PEagleTrainingOptions& o)
    : target_(target),
      config_([&] {
        PEagleConfig c;
        check(o.layers >= 1 && o.layers <= 16, "--draft-layers: expected 1..16, got " + std::to_string(o.layers));
        check(o.depths >= 1 && o.depths <= 32, "--depths: expected 1..32, got " + std::to_string(o.depths));
        c.layers = PEagleHead::config_for(target.config(), o.layers);
        c.depths = o.depths;
        c.mask_token = o.mask_token;
        c.input_layers = eagle3_input_layers(target.config().num_hidden_layers);
        return c;
      }()),
      draft_ids_(draft_ids),
      rope_(rope_config(config_, target.config()), target.options()),
      cod_ratio_(o.cod_ratio),
      cod_min_(o.cod_min),
      seed_(seed) {
  check(o.cod_ratio > 0 && o.cod_ratio <= 1 && o.cod_min >= 0 && o.cod_min <= o.cod_ratio,
        "--cod: expected r,r_min with 0 <= r_min <= r <= 1");
  const auto head = PEagleHead::random(target, seed, o.layers, o.depths, o.mask_token);
  config_.mask_token = head->config().mask_token;  // -1 given: the random head's choice
  PEagleWeights w = map_weights(head->weights(), leaf);
  if (draft_ids.defined()) w.lm_head = w.lm_head.index_select(0, draft_ids.to(w.lm_head.device())).contiguous();
  if (o.train_embedding) w.embed = leaf(target.embedding());
  w_ = std::move(w);
}

std::vector<std::pair<std::string, at::Tensor>> PEagleTrainingModel::parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> p;
  if (w_.embed.defined()) p.emplace_back("embed", w_.embed);
  p.emplace_back("fc", w_.fc);
  p.emplace_back("mask_hidden", w_.mask_hidden);
  for (size_t l = 0; l < w_.layers.size(); ++l) {
    const PEagleLayerWeights& L = w_.layers[l];
    const std::string n = "layers." + std::to_string(l) + ".";
    p.emplace_back(n + "input_norm", L.input_norm);
    if (L.hidden_norm.defined()) p.emplace_back(n + "hidden_norm", L.hidden_norm);
    for (const auto& [name, t] : std::vector<std::pair<const char*, const at::Tensor*>>{
             {"wq", &L.wq}, {"wk", &L.wk}, {"wv", &L.wv}, {"wo", &L.wo}, {"mlp_norm", &L.mlp_norm},
             {"w_gate", &L.w_gate}, {"w_up", &L.w_up}, {"w_down", &L.w_down}})
      p.emplace_back(n + name, *t);
  }
  p.emplace_back("norm", w_.norm);
  p.emplace_back("lm_head", w_.lm_head);
  return p;
}

std::map<std::string, std::string> PEagleTrainingModel::identity() const {
  std::string layers;
  for (int64_t l : config_.input_layers) layers += (layers.empty() ? "" : ",") + std::to_string(l);
  char cod[64];
  std::snprintf(cod, sizeof cod, "%.17g,%.17g", cod_ratio_, cod_min_);
  return {{"head_config", config_.layers.to_hf_json().dump()},
          {"draft_vocab", std::to_string(w_.lm_head.size(0))},
          {"feature_layers", layers},
          {"depths", std::to_string(config_.depths)},
          {"mask_token", std::to_string(config_.mask_token)},
          {"cod", cod},
          {"train_embedding", w_.embed.defined() ? "1" : "0"}};
}

std::vector<int64_t> PEagleTrainingModel::feature_layers() const {
  std::vector<int64_t> after;
  for (int64_t l : config_.input_layers) after.push_back(l - 1);
  return after;
}

at::Tensor PEagleTrainingModel::row_logits(const HeadBatch& batch, const PEagleRows& rows) const {
  const at::Tensor& windows = batch.windows;
  const int64_t B = windows.size(0), T = windows.size(1) - 1, Q = rows.size(), d = config_.layers.hidden_size;
  check(batch.features.dim() == 3 && batch.features.size(0) == B && batch.features.size(1) == T + 1 &&
            batch.features.size(2) >= 3 * d,
        "P-EAGLE training: features must be [batch, length + 1, >= 3 hidden_size], got " +
            shape_string(batch.features.sizes().vec()));
  const auto device = w_.fc.device();
  const auto A = at::tensor(rows.anchor, at::kLong), D = at::tensor(rows.depth, at::kLong);
  const auto slot = D.gt(0).to(device);
  auto tokens = windows.to(at::kCPU).index_select(1, A + 1).to(device);  // w_{a+1} (read for every row, used at depth 0)
  tokens = tokens.masked_fill(slot.unsqueeze(0), config_.mask_token);
  const auto G = batch.features.narrow(2, 0, 3 * d).to(device, at::kFloat).index_select(1, A.to(device));
  const auto fused = at::where(slot.view({1, Q, 1}), w_.mask_hidden.view({1, 1, 3 * d}), G);
  at::Tensor embeddings;
  if (w_.embed.defined()) {
    embeddings = at::embedding(w_.embed, tokens);
  } else {
    at::NoGradGuard no_grad;
    embeddings = at::embedding(target_.embedding(), tokens).to(at::kFloat);
  }
  const auto h = peagle_rows(config_, w_, rope_, embeddings, fused, (A + D).to(device), {}, {},
                             peagle_row_mask(rows).to(device), nullptr, nullptr);
  return at::matmul(rms_norm(h, w_.norm, config_.layers.rms_norm_eps), w_.lm_head.t());
}

PEagleTrainingModel::Loss PEagleTrainingModel::rows_loss(const HeadBatch& batch, const PEagleRows& rows,
                                                         bool counts) const {
  const at::Tensor& windows = batch.windows;
  const int64_t B = windows.size(0), T = windows.size(1) - 1, Q = rows.size(), d = config_.layers.hidden_size;
  check(batch.features.size(2) == 4 * d,
        "P-EAGLE training: features must be [batch, length + 1, 4 hidden_size] (three layers, then the final normed "
        "hidden state), got " + shape_string(batch.features.sizes().vec()));
  const auto device = w_.fc.device();
  const at::Tensor logits = row_logits(batch, rows);  // [B, Q, V_d]
  std::vector<int64_t> teacher_at, predicted_at;
  for (int64_t i = 0; i < Q; ++i) {
    const int64_t p = rows.anchor[static_cast<size_t>(i)] + rows.depth[static_cast<size_t>(i)];
    teacher_at.push_back(p + 1);
    predicted_at.push_back(std::min(p + 2, T));
  }
  at::Tensor p_all, top_full, weight;
  {
    at::NoGradGuard no_grad;
    const auto f = batch.features.narrow(2, 3 * d, d).index_select(1, at::tensor(teacher_at, at::kLong).to(batch.features.device()));
    const auto z = at::matmul(f.to(device, at::kFloat), target_.lm_head().to(at::kFloat).t());  // [B, Q, V]
    top_full = z.argmax(-1);
    const auto ids = draft_ids_.defined() ? draft_ids_.to(device) : at::Tensor();
    p_all = at::softmax(ids.defined() ? z.index_select(-1, ids) : z, -1);
    weight = at::ones({B, Q}, p_all.options());
    if (batch.mask.defined())
      weight = batch.mask.to(at::kCPU).index_select(1, at::tensor(predicted_at, at::kLong)).ne(0).to(device, at::kFloat);
    if (draft_ids_.defined()) {
      auto t2d = at::zeros({config_.layers.vocab_size}, at::TensorOptions().dtype(at::kBool).device(device));
      t2d.index_fill_(0, ids, true);
      weight = weight * t2d.index_select(0, top_full.flatten()).view_as(top_full).to(at::kFloat);
    }
  }
  Loss out;
  out.loss = -(weight * (p_all * at::log_softmax(logits, -1)).sum(-1)).sum() /
             static_cast<double>(batch.rows_in_step() * Q);
  if (counts) {
    at::NoGradGuard no_grad;
    auto top = logits.argmax(-1);
    if (draft_ids_.defined()) top = draft_ids_.to(device).index_select(0, top.flatten()).view_as(top);
    const auto agree = top.eq(top_full);
    const auto counted = weight.ne(0);
    // Dense [B, T, K] by (anchor, depth); absent rollouts neither tried nor agreed.
    const int64_t K = config_.depths;
    auto agreed = at::zeros({B, T * K}, at::TensorOptions().dtype(at::kBool).device(device));
    auto tried = agreed.clone();
    std::vector<int64_t> flat;
    for (int64_t i = 0; i < Q; ++i) flat.push_back(rows.anchor[static_cast<size_t>(i)] * K + rows.depth[static_cast<size_t>(i)]);
    const auto index = at::tensor(flat, at::kLong).to(device);
    agreed.index_copy_(1, index, agree.logical_and(counted));
    tried.index_copy_(1, index, counted);
    agreed = agreed.view({B, T, K});
    tried = tried.view({B, T, K});
    auto alive = at::ones({B, T}, agreed.options());
    for (int64_t n = 0; n < K; ++n) {
      const auto t = alive.logical_and(tried.select(2, n));
      alive = t.logical_and(agreed.select(2, n));
      out.tried.push_back(t.sum().item<int64_t>());
      out.agreed.push_back(alive.sum().item<int64_t>());
    }
  }
  return out;
}

at::Tensor PEagleTrainingModel::loss(const HeadBatch& batch, int64_t step) const {
  const int64_t T = batch.windows.size(1) - 1;
  const PEagleRows rows =
      peagle_cod_rows(T, config_.depths, cod_ratio_, cod_min_, seed_ * 1000003ull + static_cast<uint64_t>(step));
  return rows_loss(batch, rows, false).loss;
}

HeadEvaluation PEagleTrainingModel::evaluate(const HeadBatch& batch) const {
  const int64_t T = batch.windows.size(1) - 1;
  const Loss l = rows_loss(batch, peagle_cod_rows(T, config_.depths, 1.0, 1.0, 0), true);
  HeadEvaluation e;
  e.loss = l.loss.item<double>();
  e.counts["accuracy"] = {{l.agreed[0], l.tried[0]}};
  for (size_t k = 0; k < l.agreed.size() && k < 8; ++k) e.counts["alpha"].emplace_back(l.agreed[k], l.tried[k]);
  return e;
}

std::unique_ptr<PEagleHead> PEagleTrainingModel::to_head() const {
  const ComputeOptions& o = target_.options();
  auto copy = [&](const at::Tensor& t) { return t.detach().to(o.device, o.dtype).clone(); };
  return std::make_unique<PEagleHead>(config_, map_weights(w_, copy), draft_ids_, target_);
}

void PEagleTrainingModel::save(const std::string& dir, at::ScalarType file_dtype) const {
  to_head()->save(dir, file_dtype);
}

HeadTrainingResult train_peagle_head(const LlamaModel& target, const PEagleTrainingOptions& o, const TextDataset& data) {
  PEagleTrainingOptions options = o;
  if (options.mask_token < 0) options.mask_token = unused_token(data.token_counts(target.config().vocab_size));
  const at::Tensor ids = training_draft_vocabulary(data, options, target.config().vocab_size, options.draft_vocab,
                                                   DraftVocabularyCount::PredictedTokens);
  PEagleTrainingModel model(target, options.seed, ids, options);
  return train_draft_head(target, model, options, data);
}

}  // namespace draftlab
