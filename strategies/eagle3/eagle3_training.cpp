#include "strategies/eagle3/eagle3_training.h"

#include <cmath>
#include <limits>

#include "core/base/error.h"
#include "core/model/training_forward.h"
#include "core/training/draft_vocabulary.h"
#include "strategies/eagle3/draft_to_target.h"

namespace draftlab {

namespace {

at::Tensor leaf(const at::Tensor& t) { return t.detach().contiguous().clone(); }

// Every tensor of the head with `f` applied (training leaves from a head, a head from the leaves).
template <class F>
Eagle3HeadWeights map_weights(const Eagle3HeadWeights& w, F f) {
  Eagle3HeadWeights out;
  out.fc = f(w.fc);
  out.input_norm = f(w.input_norm);
  out.hidden_norm = f(w.hidden_norm);
  out.layer.wqkv = f(w.layer.wqkv);
  out.layer.wo = f(w.layer.wo);
  out.layer.mlp_norm = f(w.layer.mlp_norm);
  out.layer.w_gate_up = f(w.layer.w_gate_up);
  out.layer.w_down = f(w.layer.w_down);
  out.norm = f(w.norm);
  out.lm_head = f(w.lm_head);
  for (const auto& g : w.fc_norm) out.fc_norm.push_back(f(g));
  out.norm_output = w.norm_output;
  return out;
}

// float32 losses and softmaxes (float64 stays float64: gradient checks).
at::ScalarType accumulate(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

at::Tensor rms(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const auto xf = x.to(accumulate(x));
  return (xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps)).to(x.scalar_type()) * weight;
}

// x [B, T, ...] moved k rows up, zeros in the last k rows.
at::Tensor shift_up(const at::Tensor& x, int64_t k) {
  const int64_t T = x.size(1);
  if (k == 0) return x;
  auto out = at::zeros_like(x);
  if (k < T) out.narrow(1, 0, T - k).copy_(x.narrow(1, k, T - k));
  return out;
}

}  // namespace

Eagle3TrainingModel::Eagle3TrainingModel(const LlamaModel& target, uint64_t seed, at::Tensor draft_ids, int steps,
                                         double decay, std::vector<int64_t> input_layers, bool eagle31)
    : target_(target),
      config_(Eagle3Head::config_for(target.config())),
      rope_(config_, target.options()),
      steps_(steps),
      decay_(decay) {
  check(steps >= 1, "--ttt-steps: expected 1 or more, got " + std::to_string(steps));
  check(decay > 0 && decay <= 1, "--ttt-decay: expected a number in (0, 1], got " + std::to_string(decay));
  const auto head = Eagle3Head::random(target, seed, 0, draft_ids, std::move(input_layers), eagle31);  // checks them
  w_ = map_weights(head->weights(), leaf);
  draft_ids_ = head->draft_ids();
  input_layers_ = head->input_layers();
}

std::vector<std::pair<std::string, at::Tensor>> Eagle3TrainingModel::parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> p{{"fc", w_.fc},
                                                    {"input_norm", w_.input_norm},
                                                    {"hidden_norm", w_.hidden_norm},
                                                    {"layer.wqkv", w_.layer.wqkv},
                                                    {"layer.wo", w_.layer.wo},
                                                    {"layer.mlp_norm", w_.layer.mlp_norm},
                                                    {"layer.w_gate_up", w_.layer.w_gate_up},
                                                    {"layer.w_down", w_.layer.w_down},
                                                    {"norm", w_.norm},
                                                    {"lm_head", w_.lm_head}};
  for (size_t k = 0; k < w_.fc_norm.size(); ++k) p.emplace_back("fc_norm." + std::to_string(k), w_.fc_norm[k]);
  return p;
}

std::map<std::string, std::string> Eagle3TrainingModel::identity() const {
  std::string layers;
  for (int64_t l : input_layers_) layers += (layers.empty() ? "" : ",") + std::to_string(l);
  char decay[32];
  std::snprintf(decay, sizeof decay, "%.17g", decay_);
  return {{"head_config", config_.to_hf_json().dump()},
          {"draft_vocab", std::to_string(w_.lm_head.size(0))},
          {"feature_layers", layers},
          {"ttt_steps", std::to_string(steps_)},
          {"ttt_decay", decay},
          {"variant", w_.fc_norm.empty() && !w_.norm_output ? "eagle3" : "eagle3.1"}};
}

std::vector<int64_t> Eagle3TrainingModel::feature_layers() const {
  std::vector<int64_t> after;
  for (int64_t l : input_layers_) after.push_back(l - 1);
  return after;
}

at::Tensor Eagle3TrainingModel::step(const at::Tensor& hidden, const at::Tensor& tokens, int64_t offset,
                                     std::vector<at::Tensor>& keys, std::vector<at::Tensor>& values) const {
  const ModelConfig& c = config_;
  const int64_t B = tokens.size(0), T = tokens.size(1);
  const int64_t H = c.num_attention_heads, KVH = c.num_key_value_heads, hd = c.head_dim, I = c.intermediate_size;
  const int64_t G = H / KVH;
  const double eps = c.rms_norm_eps, scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const auto e = at::embedding(target_.weights().embed, tokens.to(w_.fc.device())).to(w_.fc.scalar_type());
  const auto x = at::cat({rms(e, w_.input_norm, eps), rms(hidden, w_.hidden_norm, eps)}, -1);  // embedding first
  const auto qkv = at::matmul(x, w_.layer.wqkv.t());
  const auto [cos, sin] = rope_.at_positions(at::arange(offset, offset + T, tokens.options().device(w_.fc.device())));
  const auto q = RotaryEmbedding::apply(qkv.narrow(2, 0, H * hd).view({B, T, H, hd}), cos, sin);
  keys.push_back(RotaryEmbedding::apply(qkv.narrow(2, H * hd, KVH * hd).view({B, T, KVH, hd}), cos, sin));
  values.push_back(qkv.narrow(2, (H + KVH) * hd, KVH * hd).view({B, T, KVH, hd}));

  // Scores against the step-0 keys (causal over rows) and the diagonal keys of steps 1..k, one softmax.
  const auto qg = (q * scale).view({B, T, KVH, G, hd});
  auto causal = at::einsum("btkgd,bskd->bkgts", {qg, keys[0]});  // [B, KVH, G, T, T]
  const auto above = at::ones({T, T}, at::TensorOptions().dtype(at::kBool).device(causal.device())).triu(1);
  causal = causal.masked_fill(above, -std::numeric_limits<double>::infinity());
  std::vector<at::Tensor> parts{causal};
  for (size_t s = 1; s < keys.size(); ++s)  // [B, T, KVH, G] -> [B, KVH, G, T, 1]
    parts.push_back((qg * keys[s].unsqueeze(3)).sum(-1).permute({0, 2, 3, 1}).unsqueeze(-1));
  const auto scores = at::cat(parts, -1);
  const auto probs = at::softmax(scores, -1, accumulate(scores)).to(q.scalar_type());
  auto attn = at::einsum("bkgts,bskd->btkgd", {probs.narrow(-1, 0, T), values[0]});
  for (size_t s = 1; s < values.size(); ++s) {
    const auto p = probs.select(-1, T + static_cast<int64_t>(s) - 1).permute({0, 3, 1, 2}).unsqueeze(-1);  // [B,T,KVH,G,1]
    attn = attn + p * values[s].unsqueeze(3);
  }
  const auto y = hidden + at::matmul(attn.reshape({B, T, H * hd}), w_.layer.wo.t());  // residual: the raw hidden
  const auto gate_up = at::matmul(rms(y, w_.layer.mlp_norm, eps), w_.layer.w_gate_up.t());
  return y + at::matmul(at::silu(gate_up.narrow(2, 0, I)) * gate_up.narrow(2, I, I), w_.layer.w_down.t());
}

Eagle3TrainingModel::Unrolled Eagle3TrainingModel::unroll(const at::Tensor& windows_in, const at::Tensor& layer_features,
                                                          int steps) const {
  check(windows_in.dim() == 2 && windows_in.size(1) >= 2 && windows_in.scalar_type() == at::kLong,
        "EAGLE-3 training: windows must be int64 [batch, length + 1]");
  const int64_t B = windows_in.size(0), T = windows_in.size(1) - 1, d = config_.hidden_size;
  check(layer_features.dim() == 3 && layer_features.size(0) == B && layer_features.size(1) == T + 1 &&
            layer_features.size(2) == 3 * d,
        "EAGLE-3 training: layer features must be [batch, length + 1, 3 hidden_size] = [" + std::to_string(B) + ", " +
            std::to_string(T + 1) + ", " + std::to_string(3 * d) + "], got " +
            shape_string(layer_features.sizes().vec()));
  check(T + steps <= rope_.max_positions(), "EAGLE-3 training: window plus steps exceeds max_position_embeddings");
  const auto windows = windows_in.to(w_.fc.device());
  const auto G = layer_features.narrow(1, 0, T).to(w_.fc.device(), w_.fc.scalar_type());
  auto hidden = at::matmul(eagle3_fc_input(G, w_, config_.rms_norm_eps), w_.fc.t());
  std::vector<at::Tensor> keys, values;
  Unrolled u;
  for (int k = 0; k < steps; ++k) {
    // Teacher-forced tokens w_{j+1+k}; rows past the window read token 0 and never count.
    auto tokens = at::zeros({B, T}, windows.options());
    const int64_t valid = std::max<int64_t>(0, T - k);
    if (valid > 0) tokens.narrow(1, 0, valid).copy_(windows.narrow(1, 1 + k, valid));
    hidden = step(hidden, tokens, k, keys, values);
    // EAGLE-3.1's norm_output: the normed vector is both what the LM head reads and what the next step gets.
    const auto normed = rms(hidden, w_.norm, config_.rms_norm_eps);
    if (w_.norm_output) hidden = normed;
    u.outputs.push_back(hidden);
    u.logits.push_back(at::matmul(normed, w_.lm_head.t()).to(accumulate(hidden)));
  }
  return u;
}

Eagle3TrainingModel::Loss Eagle3TrainingModel::ttt_loss(const HeadBatch& batch, bool with_alpha) const {
  const at::Tensor& windows = batch.windows;
  const int64_t B = windows.size(0), T = windows.size(1) - 1, d = config_.hidden_size;
  check(batch.features.dim() == 3 && batch.features.size(2) == 4 * d,
        "EAGLE-3 training: features must be [batch, length + 1, 4 hidden_size] (three layers, then the final "
        "normed hidden state), got " + shape_string(batch.features.sizes().vec()));
  const auto device = w_.fc.device();
  const int unrolled = with_alpha ? std::max(steps_, kAlphaSteps) : steps_;
  const Unrolled u = unroll(windows, batch.features.narrow(2, 0, 3 * d), unrolled);
  const at::ScalarType loss_type = accumulate(u.logits[0]);

  // The teacher of row i (before shifting by the step): the target's logits at position i + 1, predicting w_{i+2}.
  at::Tensor p_all, top_full, counts_row;  // [B, T, V_d], [B, T], [B, T] 0/1
  {
    at::NoGradGuard no_grad;
    const auto f = batch.features.narrow(2, 3 * d, d).narrow(1, 1, T).to(device, w_.fc.scalar_type());
    const auto z = at::matmul(f, target_.weights().lm_head.to(f.scalar_type()).t()).to(loss_type);
    top_full = z.argmax(-1);
    const auto ids = draft_ids_.defined() ? draft_ids_.to(device) : at::Tensor();
    p_all = at::softmax(ids.defined() ? z.index_select(-1, ids) : z, -1);
    // Rows counted by the loss mask at the predicted token (mask[i + 2], mask[T] past the window's end).
    if (batch.mask.defined()) {
      const auto m = batch.mask.to(device).ne(0).to(loss_type);
      counts_row = T == 1 ? m.narrow(1, 1, 1).clone() : at::cat({m.narrow(1, 2, T - 1), m.narrow(1, T, 1)}, 1);
    } else {
      counts_row = at::ones({B, T}, p_all.options());
    }
  }
  at::Tensor in_vocab = at::ones({B, T}, p_all.options());
  if (draft_ids_.defined()) {
    auto t2d = at::zeros({config_.vocab_size}, at::TensorOptions().dtype(at::kBool).device(device));
    t2d.index_fill_(0, draft_ids_.to(device), true);
    in_vocab = t2d.index_select(0, top_full.flatten()).view_as(top_full).to(loss_type);
  }
  Loss out;
  at::Tensor total;
  at::Tensor alive;  // [B, T] bool: rows whose steps so far all agreed
  const auto rows_ok = at::arange(T, at::TensorOptions().dtype(at::kLong).device(device));
  for (int k = 0; k < unrolled; ++k) {
    const auto valid = rows_ok.lt(T - k).unsqueeze(0).expand({B, T}).to(loss_type);  // w_{j+1+k} in the window
    const auto counted = valid * shift_up(counts_row, k);
    const auto log_q = at::log_softmax(u.logits[k], -1);
    if (k < steps_) {
      const auto weight = counted * shift_up(in_vocab, k);
      // Over the whole step's rows (the parts' losses add up to the step's).
      const auto loss_k = -(weight * (shift_up(p_all, k) * log_q).sum(-1)).sum() /
                          static_cast<double>(batch.rows_in_step() * T);
      out.step_loss.push_back(loss_k.item<double>());
      const auto weighted = std::pow(decay_, k) * loss_k;
      total = total.defined() ? total + weighted : weighted;
    }
    // Agreement of the head's top-1 (a target id through d2t) with the target's full-vocabulary top-1.
    at::NoGradGuard no_grad;
    auto top = u.logits[k].argmax(-1);
    if (draft_ids_.defined()) top = draft_ids_.to(device).index_select(0, top.flatten()).view_as(top);
    const auto agree = top.eq(shift_up(top_full, k)).logical_and(counted.ne(0));
    if (k == 0) {
      out.correct = agree.sum().item<int64_t>();
      out.count = counted.sum().item<int64_t>();
    }
    if (with_alpha && k < kAlphaSteps) {
      const auto tried = k == 0 ? counted.ne(0) : alive.logical_and(counted.ne(0));
      alive = tried.logical_and(agree);
      out.tried[k] = tried.sum().item<int64_t>();
      out.agreed[k] = alive.sum().item<int64_t>();
    }
  }
  out.loss = total;
  return out;
}

at::Tensor Eagle3TrainingModel::loss(const HeadBatch& batch, int64_t) const { return ttt_loss(batch).loss; }

HeadEvaluation Eagle3TrainingModel::evaluate(const HeadBatch& batch) const {
  const Loss l = ttt_loss(batch, /*with_alpha=*/true);
  HeadEvaluation e;
  e.loss = l.loss.item<double>();
  e.counts["accuracy"] = {{l.correct, l.count}};
  for (int n = 0; n < kAlphaSteps; ++n) e.counts["alpha"].emplace_back(l.agreed[n], l.tried[n]);
  return e;
}

std::unique_ptr<Eagle3Head> Eagle3TrainingModel::to_head() const {
  const ComputeOptions& o = target_.options();
  auto copy = [&](const at::Tensor& t) { return t.detach().to(o.device, o.dtype).clone(); };
  return std::make_unique<Eagle3Head>(config_, map_weights(w_, copy), target_, draft_ids_, input_layers_);
}

void Eagle3TrainingModel::save(const std::string& dir, at::ScalarType file_dtype) const {
  to_head()->save(dir, file_dtype);
}

HeadTrainingResult train_eagle3_head(const LlamaModel& target, const Eagle3TrainingOptions& o, const TextDataset& data) {
  const int64_t V = target.config().vocab_size;
  const at::Tensor ids = !o.vocab_mapping.empty()
                             ? read_vocabulary_mapping(o.vocab_mapping, V)
                             : training_draft_vocabulary(data, o, V, o.draft_vocab, DraftVocabularyCount::PredictedTokens);
  Eagle3TrainingModel model(target, o.seed, ids, o.steps, o.decay, o.feature_layers, o.eagle31);
  return train_draft_head(target, model, o, data);
}

}  // namespace draftlab
