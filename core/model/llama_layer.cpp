#include "core/model/llama_layer.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/base/error.h"
#include "core/model/host_tensor.h"
#include "core/model/mixture_of_experts.h"
#include "core/model/rope.h"
#include "core/ops/skinny_gemm.h"

namespace draftlab {

namespace {

// Grouped-query attention against the cache. q [n, H, hd]; k, v [KVH, T, hd]; mask [n, T] or undefined.
// Query heads sharing a kv head are stacked as extra rows, so K and V are never repeated in memory.
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                     double scale) {
  const int64_t n = q.size(0), H = q.size(1), hd = q.size(2), KVH = k.size(0), T = k.size(1);
  const int64_t G = H / KVH;
  auto qg = (q.transpose(0, 1) * scale).reshape({KVH, G * n, hd});
  auto scores = at::bmm(qg, k.transpose(1, 2));  // [KVH, G n, T]
  if (mask.defined()) scores = scores.view({KVH, G, n, T}).add(mask).view({KVH, G * n, T});
  auto probs = scores.scalar_type() == at::kFloat ? at::softmax(scores, -1)
                                                  : at::softmax(scores, -1, at::kFloat).to(scores.scalar_type());
  auto out = at::bmm(probs, v);  // [KVH, G n, hd]
  return out.view({H, n, hd}).transpose(0, 1).reshape({n, H * hd});
}

}  // namespace

// x @ w^T with w column-major (see llama_weights.h).
// Few rows (decoding, verifying small trees) on CPU in float32: the skinny GEMM kernel, which streams the weight
// once whatever n is (OpenBLAS's GEMM packs the whole matrix first: 2 rows cost ~4x one row). Unlike the native
// path's kernels it is not row-independent: from n = 5 on a row's last bits differ from the row computed alone
// (tests/ops SkinnyGemm.RowsOfALargerCallRoundDifferently), so this path verifies a tree with vanilla's arithmetic
// only up to rounding.
// Everything else (more rows, other dtypes or devices, autograd): libtorch.
at::Tensor project(const at::Tensor& x, const at::Tensor& w) {
  const int64_t n = x.size(0), in = x.size(1), out = w.size(0);
  const bool column_major = w.dim() == 2 && w.stride(0) == 1 && w.stride(1) >= out;
  const bool needs_grad = at::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad());
  if (x.device().is_cpu() && x.scalar_type() == at::kFloat && w.scalar_type() == at::kFloat && column_major &&
      !needs_grad && n <= skinny_gemm_max_rows()) {
    const auto xc = x.contiguous();
    auto y = at::empty({n, out}, x.options());
    const float* xp = xc.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const int64_t ldw = w.stride(1);
    // Blocks of 64 outputs, at least 1024 per thread so small matrices are not split into tiny tasks.
    at::parallel_for(0, (out + 63) / 64, 16, [&](int64_t b0, int64_t b1) {
      skinny_gemm_f32(xp, in, wp, ldw, yp, out, n, in, b0 * 64, std::min(out, b1 * 64));
    });
    return y;
  }
  if (n == 1 && x.device().is_cpu()) return at::mv(w, x[0]).unsqueeze(0);
  return at::linear(x, w);
}

// RMSNorm in float32 whatever the compute dtype (as Hugging Face does; float64 stays float64 for gradient checks),
// then back.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  auto xf = x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble ? x : x.to(at::kFloat);
  auto normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return normed.to(x.scalar_type()) * weight;
}

// Additive attention mask [n, T] over the cache prefix (always visible) and the new tokens (per the ancestor
// mask). Undefined when n == 1: a single token sees everything.
at::Tensor attention_mask(const at::Tensor& ancestor, int64_t start, int64_t n, const ComputeOptions& o) {
  if (n == 1) return {};
  at::Tensor allowed = ancestor.defined() ? ancestor.to(o.device, at::kBool)
                                          : at::ones({n, n}, at::TensorOptions().dtype(at::kBool).device(o.device)).tril();
  auto mask = at::zeros({n, start + n}, o.tensor_options());
  mask.narrow(1, start, n).masked_fill_(allowed.logical_not(), -std::numeric_limits<float>::infinity());
  return mask;
}

void check_ancestor_mask(const at::Tensor& mask, int64_t n) {
  check(mask.dim() == 2 && mask.size(0) == n && mask.size(1) == n,
        [&] { return "forward: ancestor mask must be [n, n] for n = " + std::to_string(n); });
  const at::Tensor host = to_host(mask, at::kBool);
  const bool* m = host.data_ptr<bool>();
  for (int64_t i = 0; i < n; ++i)
    check(m[i * n + i], "forward: ancestor mask must be true on the diagonal (each token sees itself)");
}

at::Tensor llama_decoder_layer(const at::Tensor& h, const LlamaLayerWeights& L, const ModelConfig& c, KvCache& cache,
                               int64_t layer, int64_t start, const at::Tensor& cos, const at::Tensor& sin,
                               const at::Tensor& mask, bool input_norm, int64_t* experts_read,
                               const at::Tensor& attention_input) {
  const int64_t n = h.size(0), T = start + n;
  const int64_t H = c.num_attention_heads, KVH = c.num_key_value_heads, hd = c.head_dim;
  const int64_t I = c.intermediate_size;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));

  const at::Tensor attn_in =
      attention_input.defined() ? attention_input : input_norm ? rms_norm(h, L.attn_norm, c.rms_norm_eps) : h;
  auto qkv = project(attn_in, L.wqkv);
  auto qk = RotaryEmbedding::apply(qkv.narrow(1, 0, (H + KVH) * hd).view({n, H + KVH, hd}), cos, sin);
  auto v = qkv.narrow(1, (H + KVH) * hd, KVH * hd).view({n, KVH, hd});
  cache.write(layer, start, qk.narrow(1, H, KVH).transpose(0, 1), v.transpose(0, 1));
  // A float16 cache is widened to the activations' dtype (a no-op when they match).
  auto attn = attention(qk.narrow(1, 0, H), cache.keys(layer, T).to(qk.scalar_type()),
                        cache.values(layer, T).to(qk.scalar_type()), mask, scale);
  auto x = h + project(attn, L.wo);

  const auto normed = rms_norm(x, L.mlp_norm, c.rms_norm_eps);
  if (c.mixture_of_experts()) return x + mixture_of_experts(normed, L, c, project, nullptr, experts_read);
  auto gate_up = project(normed, L.w_gate_up);
  return x + project(at::silu(gate_up.narrow(1, 0, I)) * gate_up.narrow(1, I, I), L.w_down);
}

}  // namespace draftlab
