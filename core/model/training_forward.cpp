#include "core/model/training_forward.h"

#include <cmath>
#include <limits>

#include "core/base/error.h"
#include "core/model/mixture_of_experts.h"

namespace draftlab {

namespace {

// x @ w^T for a weight w [out, in] (column-major storage makes w^T a contiguous matrix for the GEMM).
at::Tensor times_weight(const at::Tensor& x, const at::Tensor& w) { return at::matmul(x, w.t()); }

// Reduced precision (bf16/fp16) is accumulated in float32, as LlamaModel does; float32 and float64 stay as they
// are (float64 is for gradient checks, which need every digit).
at::ScalarType accumulate_type(const at::Tensor& x) {
  return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// RMSNorm as llama_layer.h's rms_norm, but without demoting float64.
at::Tensor norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  auto xf = x.to(accumulate_type(x));
  return (xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps)).to(x.scalar_type()) * weight;
}

// Causal grouped-query attention. q [B, T, H, hd]; k, v [B, T, KVH, hd] -> [B, T, H * hd].
// The G = H / KVH query heads sharing a kv head are stacked as extra rows (head h = kv * G + g, as in
// LlamaModel), so one matmul per kv head serves its whole group and K/V are never repeated in memory.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), hd = q.size(3), KVH = k.size(2), G = H / KVH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  auto qg = (q.permute({0, 2, 1, 3}) * scale).reshape({B, KVH, G * T, hd});
  auto scores = at::matmul(qg, k.permute({0, 2, 3, 1}));  // [B, KVH, G T, T]
  scores = (scores.view({B, KVH, G, T, T}) + mask).view({B, KVH, G * T, T});
  auto probs = at::softmax(scores, -1, accumulate_type(scores)).to(q.scalar_type());
  auto out = at::matmul(probs, v.permute({0, 2, 1, 3}));  // [B, KVH, G T, hd]
  return out.view({B, H, T, hd}).permute({0, 2, 1, 3}).reshape({B, T, H * hd});
}

}  // namespace

at::Tensor causal_mask(int64_t length, const at::TensorOptions& options) {
  return at::full({length, length}, -std::numeric_limits<float>::infinity(), options).triu(1);
}

at::Tensor training_decoder_layer(const ModelConfig& c, const LlamaLayerWeights& L, const at::Tensor& h_in,
                                  const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask,
                                  bool input_norm, at::Tensor* router_logits) {
  const int64_t B = h_in.size(0), T = h_in.size(1);
  const int64_t H = c.num_attention_heads, KVH = c.num_key_value_heads, hd = c.head_dim, I = c.intermediate_size;
  auto h = h_in;
  auto qkv = times_weight(input_norm ? norm(h, L.attn_norm, c.rms_norm_eps) : h, L.wqkv);
  auto q = RotaryEmbedding::apply(qkv.narrow(2, 0, H * hd).view({B, T, H, hd}), cos, sin);
  auto k = RotaryEmbedding::apply(qkv.narrow(2, H * hd, KVH * hd).view({B, T, KVH, hd}), cos, sin);
  auto v = qkv.narrow(2, (H + KVH) * hd, KVH * hd).view({B, T, KVH, hd});
  h = h + times_weight(causal_attention(q, k, v, mask), L.wo);
  const auto normed = norm(h, L.mlp_norm, c.rms_norm_eps);
  if (c.mixture_of_experts()) {
    const auto flat = normed.reshape({B * T, normed.size(2)});
    return h + mixture_of_experts(flat, L, c, times_weight, router_logits).view(h.sizes());
  }
  auto gate_up = times_weight(normed, L.w_gate_up);
  return h + times_weight(at::silu(gate_up.narrow(2, 0, I)) * gate_up.narrow(2, I, I), L.w_down);
}

namespace {

// The forward of training_features, keeping the residual after the layers in `keep` (in that order).
// positions [T] and an additive mask [T, T]; undefined: 0..T-1 and causal.
at::Tensor features_keeping(const ModelConfig& c, const LlamaWeights& w, const RotaryEmbedding& rope,
                            const at::Tensor& tokens_in, std::vector<at::Tensor>* router_logits,
                            const std::vector<int64_t>& keep, std::vector<at::Tensor>* kept,
                            const at::Tensor& positions_in = {}, const at::Tensor& mask_in = {}) {
  check(tokens_in.dim() == 2 && tokens_in.scalar_type() == at::kLong,
        "training_forward: tokens must be int64 [batch, length]");
  const int64_t T = tokens_in.size(1);
  const auto tokens = tokens_in.to(w.embed.device());
  at::Tensor positions = positions_in.defined() ? positions_in.to(tokens.device()) : at::arange(T, tokens.options());
  check(positions.dim() == 1 && positions.size(0) == T && positions.scalar_type() == at::kLong,
        "training_forward: positions must be int64 [" + std::to_string(T) + "]");
  // Given positions are checked on the host (a sync, only for the masked form); the default ones are 0..T-1.
  const int64_t last = !positions_in.defined() ? T - 1 : T > 0 ? positions.max().item<int64_t>() : 0;
  check(last < rope.max_positions() && (!positions_in.defined() || T == 0 || positions.min().item<int64_t>() >= 0),
        "training_forward: position " + std::to_string(last) + " outside [0, max_position_embeddings = " +
            std::to_string(rope.max_positions()) + ")");
  const auto [cos, sin] = rope.at_positions(positions);  // [T, 1, hd/2]: broadcasts over [B, T, heads, hd/2]
  at::Tensor mask = mask_in.defined() ? mask_in.to(w.embed.device(), w.embed.scalar_type())
                                      : causal_mask(T, w.embed.options());
  check(mask.dim() == 2 && mask.size(0) == T && mask.size(1) == T,
        "training_forward: mask must be [" + std::to_string(T) + ", " + std::to_string(T) + "]");

  auto h = at::embedding(w.embed, tokens);  // [B, T, d]
  if (kept) kept->assign(keep.size(), at::Tensor());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    at::Tensor logits;
    h = training_decoder_layer(c, w.layers[l], h, cos, sin, mask, /*input_norm=*/true,
                               router_logits ? &logits : nullptr);
    if (router_logits && logits.defined()) router_logits->push_back(logits);
    for (size_t k = 0; k < keep.size(); ++k)
      if (keep[k] == static_cast<int64_t>(l)) (*kept)[k] = h;
  }
  return norm(h, w.norm, c.rms_norm_eps);
}

}  // namespace

at::Tensor training_features(const ModelConfig& c, const LlamaWeights& w, const RotaryEmbedding& rope,
                             const at::Tensor& tokens, std::vector<at::Tensor>* router_logits) {
  return features_keeping(c, w, rope, tokens, router_logits, {}, nullptr);
}

at::Tensor training_layer_features(const ModelConfig& c, const LlamaWeights& w, const RotaryEmbedding& rope,
                                   const at::Tensor& tokens, const std::vector<int64_t>& feature_layers) {
  if (feature_layers.empty()) return training_features(c, w, rope, tokens);
  for (int64_t l : feature_layers)
    check(l >= 0 && l < c.num_hidden_layers, "training_layer_features: layer " + std::to_string(l) +
                                                 " outside [0, " + std::to_string(c.num_hidden_layers) + ")");
  std::vector<at::Tensor> kept;
  const auto final_features = features_keeping(c, w, rope, tokens, nullptr, feature_layers, &kept);
  kept.push_back(final_features);
  return at::cat(kept, -1);
}

at::Tensor training_forward(const ModelConfig& c, const LlamaWeights& w, const RotaryEmbedding& rope,
                            const at::Tensor& tokens, std::vector<at::Tensor>* router_logits) {
  const at::Tensor& head = c.tie_word_embeddings ? w.embed : w.lm_head;
  auto logits = times_weight(training_features(c, w, rope, tokens, router_logits), head);
  return logits.to(accumulate_type(logits));
}

at::Tensor training_forward_masked(const ModelConfig& c, const LlamaWeights& w, const RotaryEmbedding& rope,
                                   const at::Tensor& tokens, const at::Tensor& positions, const at::Tensor& mask) {
  check(positions.defined() && mask.defined(), "training_forward_masked: positions and mask are required");
  const at::Tensor& head = c.tie_word_embeddings ? w.embed : w.lm_head;
  auto logits = times_weight(features_keeping(c, w, rope, tokens, nullptr, {}, nullptr, positions, mask), head);
  return logits.to(accumulate_type(logits));
}

namespace {

// next_token_loss, also handing out the router logits of a mixture of experts.
at::Tensor cross_entropy_of_windows(const ModelConfig& c, const LlamaWeights& w, const RotaryEmbedding& rope,
                                    const at::Tensor& windows, std::vector<at::Tensor>* router_logits) {
  check(windows.dim() == 2 && windows.size(1) >= 2, "next_token_loss: windows must be [batch, length + 1]");
  const int64_t T = windows.size(1) - 1;
  auto logits = training_forward(c, w, rope, windows.narrow(1, 0, T), router_logits);
  auto targets = windows.narrow(1, 1, T).to(logits.device());
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

}  // namespace

at::Tensor next_token_loss(const ModelConfig& c, const LlamaWeights& w, const RotaryEmbedding& rope,
                           const at::Tensor& windows) {
  return cross_entropy_of_windows(c, w, rope, windows, nullptr);
}

at::Tensor language_model_training_loss(const ModelConfig& c, const LlamaWeights& w, const RotaryEmbedding& rope,
                                        const at::Tensor& windows) {
  if (!c.mixture_of_experts() || !(c.router_aux_loss_coef > 0)) return next_token_loss(c, w, rope, windows);
  std::vector<at::Tensor> router_logits;
  const auto loss = cross_entropy_of_windows(c, w, rope, windows, &router_logits);
  return loss + c.router_aux_loss_coef * load_balancing_loss(router_logits, c.num_local_experts, c.num_experts_per_tok);
}

std::vector<std::pair<std::string, at::Tensor>> trainable_parameters(const ModelConfig& c, const LlamaWeights& w) {
  std::vector<std::pair<std::string, at::Tensor>> p;
  p.emplace_back("embed", w.embed);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const std::string n = "layers." + std::to_string(l) + ".";
    const LlamaLayerWeights& L = w.layers[l];
    p.emplace_back(n + "attn_norm", L.attn_norm);
    p.emplace_back(n + "wqkv", L.wqkv);
    p.emplace_back(n + "wo", L.wo);
    p.emplace_back(n + "mlp_norm", L.mlp_norm);
    if (c.mixture_of_experts()) {
      p.emplace_back(n + "router", L.router);
      for (size_t e = 0; e < L.expert_gate_up.size(); ++e) {
        p.emplace_back(n + "experts." + std::to_string(e) + ".w_gate_up", L.expert_gate_up[e]);
        p.emplace_back(n + "experts." + std::to_string(e) + ".w_down", L.expert_down[e]);
      }
    } else {
      p.emplace_back(n + "w_gate_up", L.w_gate_up);
      p.emplace_back(n + "w_down", L.w_down);
    }
  }
  p.emplace_back("norm", w.norm);
  if (!c.tie_word_embeddings) p.emplace_back("lm_head", w.lm_head);
  return p;
}

LlamaWeights inference_weights(const ModelConfig& c, const LlamaWeights& t) {
  auto copy = [](const at::Tensor& x) { return x.defined() ? x.detach().clone() : x; };
  LlamaWeights w;
  w.embed = copy(t.embed);
  for (const LlamaLayerWeights& L : t.layers) {
    LlamaLayerWeights C{copy(L.attn_norm), copy(L.wqkv), copy(L.wo), copy(L.mlp_norm), copy(L.w_gate_up),
                        copy(L.w_down), copy(L.router), {}, {}};
    for (const auto& e : L.expert_gate_up) C.expert_gate_up.push_back(copy(e));
    for (const auto& e : L.expert_down) C.expert_down.push_back(copy(e));
    w.layers.push_back(std::move(C));
  }
  w.norm = copy(t.norm);
  w.lm_head = c.tie_word_embeddings ? w.embed : copy(t.lm_head);
  use_column_major(w);
  return w;
}

}  // namespace draftlab
