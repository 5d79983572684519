#include "core/model/llama_model.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/llama2c_checkpoint.h"
#include "core/io/safetensors.h"
#include "core/model/llama_layer.h"

namespace draftlab {

namespace {

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
  if (mask.defined()) check_ancestor_mask(mask, n);
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
  const auto [cos, sin] = rope_.at_positions(positions);
  const auto mask = attention_mask(ancestor_mask, start, n, options_);

  ForwardOutput out;
  auto h = at::embedding(weights_.embed, tokens);  // [n, d]
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    h = llama_decoder_layer(h, weights_.layers[l], c, cache, l, start, cos, sin, mask);
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
