#include "core/model/llama_model.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/llama2c_checkpoint.h"
#include "core/io/safetensors.h"

namespace draftlab {

namespace {

// x @ w^T with w column-major (see llama_weights.h). For a single row, a matrix-vector product: OpenBLAS's GEMV
// is several times faster than its GEMM with m = 1, and decoding one token is the case that matters most.
at::Tensor project(const at::Tensor& x, const at::Tensor& w) {
  if (x.size(0) == 1 && x.device().is_cpu()) return at::mv(w, x[0]).unsqueeze(0);
  return at::linear(x, w);
}

// RMSNorm in float32 whatever the compute dtype (as Hugging Face does), then back.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  auto xf = x.scalar_type() == at::kFloat ? x : x.to(at::kFloat);
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

void check_forward_inputs(const ModelConfig& c, const KvCache& cache, const at::Tensor& tokens,
                          const at::Tensor& positions, const at::Tensor& mask, int64_t max_positions) {
  check(tokens.dim() == 1 && tokens.size(0) > 0, "forward: tokens must be a non-empty 1-D tensor");
  const int64_t n = tokens.size(0);
  check(positions.dim() == 1 && positions.size(0) == n, "forward: positions must have one entry per token");
  check(tokens.scalar_type() == at::kLong && positions.scalar_type() == at::kLong,
        "forward: tokens and positions must be int64");
  cache.check_room(n);
  const int64_t tmin = tokens.min().item<int64_t>(), tmax = tokens.max().item<int64_t>();
  if (tmin < 0 || tmax >= c.vocab_size)
    throw Error("forward: token id " + std::to_string(tmin < 0 ? tmin : tmax) + " outside the vocabulary [0, " +
                std::to_string(c.vocab_size) + ")");
  const int64_t pmin = positions.min().item<int64_t>(), pmax = positions.max().item<int64_t>();
  if (pmin < 0 || pmax >= max_positions)
    throw Error("forward: position " + std::to_string(pmin < 0 ? pmin : pmax) +
                " outside the context [0, " + std::to_string(max_positions) + ")");
  if (mask.defined()) {
    check(mask.dim() == 2 && mask.size(0) == n && mask.size(1) == n,
          "forward: ancestor mask must be [n, n] for n = " + std::to_string(n));
    check(mask.to(at::kBool).diagonal().all().item<bool>(),
          "forward: ancestor mask must be true on the diagonal (each token sees itself)");
  }
}

}  // namespace

LlamaModel::LlamaModel(ModelConfig config, LlamaWeights weights, ComputeOptions options)
    : config_(std::move(config)), weights_(std::move(weights)), options_(options), rope_(config_, options_) {}

int64_t LlamaModel::num_parameters() const {
  int64_t n = weights_.embed.numel() + weights_.norm.numel();
  if (!config_.tie_word_embeddings) n += weights_.lm_head.numel();
  for (const auto& L : weights_.layers)
    n += L.attn_norm.numel() + L.wqkv.numel() + L.wo.numel() + L.mlp_norm.numel() + L.w_gate_up.numel() +
         L.w_down.numel();
  return n;
}

KvCache LlamaModel::make_cache(int64_t capacity) const {
  return KvCache(config_.num_hidden_layers, config_.num_key_value_heads, config_.head_dim, capacity, options_);
}

ForwardOutput LlamaModel::forward(KvCache& cache, const at::Tensor& tokens_in, const at::Tensor& positions_in,
                                  const at::Tensor& ancestor_mask, const ForwardOptions& fo) const {
  const ModelConfig& c = config_;
  check_forward_inputs(c, cache, tokens_in, positions_in, ancestor_mask, rope_.max_positions());
  const auto tokens = tokens_in.to(options_.device);
  const auto positions = positions_in.to(options_.device);
  const int64_t n = tokens.size(0), start = cache.length(), T = start + n;
  const int64_t H = c.num_attention_heads, KVH = c.num_key_value_heads, hd = c.head_dim;
  const int64_t I = c.intermediate_size;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));

  const auto [cos, sin] = rope_.at_positions(positions);
  const auto mask = attention_mask(ancestor_mask, start, n, options_);

  ForwardOutput out;
  auto h = at::embedding(weights_.embed, tokens);  // [n, d]
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LlamaLayerWeights& L = weights_.layers[l];
    auto qkv = project(rms_norm(h, L.attn_norm, c.rms_norm_eps), L.wqkv);
    auto qk = RotaryEmbedding::apply(qkv.narrow(1, 0, (H + KVH) * hd).view({n, H + KVH, hd}), cos, sin);
    auto v = qkv.narrow(1, (H + KVH) * hd, KVH * hd).view({n, KVH, hd});
    cache.write(l, start, qk.narrow(1, H, KVH).transpose(0, 1), v.transpose(0, 1));
    auto attn = attention(qk.narrow(1, 0, H), cache.keys(l, T), cache.values(l, T), mask, scale);
    h = h + project(attn, L.wo);

    auto gate_up = project(rms_norm(h, L.mlp_norm, c.rms_norm_eps), L.w_gate_up);
    h = h + project(at::silu(gate_up.narrow(1, 0, I)) * gate_up.narrow(1, I, I), L.w_down);
    for (int64_t want : fo.capture_layers)
      if (want == l) out.hidden.push_back(h);
  }
  cache.advance_to(T);

  out.features = rms_norm(h, weights_.norm, c.rms_norm_eps);
  at::Tensor rows;
  switch (fo.logits) {
    case ForwardOptions::Logits::All: rows = out.features; break;
    case ForwardOptions::Logits::Last: rows = out.features.narrow(0, n - 1, 1); break;
    case ForwardOptions::Logits::Rows: rows = out.features.index_select(0, fo.rows.to(options_.device)); break;
    case ForwardOptions::Logits::None: break;
  }
  if (rows.defined()) out.logits = project(rows, weights_.lm_head).to(at::kFloat);
  return out;
}

ForwardOutput LlamaModel::forward_chain(KvCache& cache, const std::vector<int64_t>& tokens,
                                        const ForwardOptions& options) const {
  check(!tokens.empty(), "forward_chain: no tokens");
  auto t = at::tensor(tokens, at::TensorOptions().dtype(at::kLong));
  auto pos = at::arange(cache.length(), cache.length() + static_cast<int64_t>(tokens.size()),
                        at::TensorOptions().dtype(at::kLong));
  return forward(cache, t, pos, {}, options);
}

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path, const ComputeOptions& options) {
  check_supported(options);
  const bool is_bin = path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0 && is_file(path);
  if (is_bin) {
    Llama2cCheckpoint ckpt(path);
    auto weights = load_llama_weights(
        ckpt.config(), [&](const std::string& n) { return ckpt.find(n); }, /*rope_pairs=*/true, path, options);
    return std::make_unique<LlamaModel>(ckpt.config(), std::move(weights), options);
  }
  std::string dir = path;
  if (is_file(path)) {
    auto slash = path.find_last_of('/');
    dir = slash == std::string::npos ? "." : path.substr(0, slash);
  } else if (!is_directory(path)) {
    throw Error::at(path, "not found (expected a Hugging Face model folder, a .safetensors file or a llama2.c .bin)");
  }
  const std::string config_path = dir + "/config.json";
  if (!is_file(config_path))
    throw Error::at(config_path, "not found: a Hugging Face model needs config.json beside its safetensors");
  ModelConfig config = load_hf_config(config_path);
  SafetensorsCollection tensors(path);
  auto weights = load_llama_weights(
      config, [&](const std::string& n) { return tensors.find(n); }, /*rope_pairs=*/false, tensors.description(),
      options);
  return std::make_unique<LlamaModel>(std::move(config), std::move(weights), options);
}

void LlamaModel::save_hf(const std::string& dir, at::ScalarType file_dtype) const {
  check(is_directory(dir), dir + ": not a directory");
  std::string torch_dtype = file_dtype == at::kFloat ? "float32" : file_dtype == at::kHalf ? "float16" : "bfloat16";
  DType st = file_dtype == at::kFloat ? DType::F32 : file_dtype == at::kHalf ? DType::F16 : DType::BF16;
  auto named = hf_named_tensors(config_, weights_, file_dtype);
  std::vector<TensorToWrite> entries;
  for (const auto& [name, t] : named)
    entries.push_back({name, st, t.sizes().vec(), t.data_ptr(), static_cast<size_t>(t.nbytes())});
  write_safetensors(dir + "/model.safetensors", entries, {{"format", "pt"}});
  write_file_atomically(dir + "/config.json", config_.to_hf_json(torch_dtype).dump(2) + "\n");
}

}  // namespace draftlab
