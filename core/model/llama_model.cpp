#include "core/model/llama_model.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/base/platform.h"
#include "core/io/gguf_checkpoint.h"
#include "core/io/llama2c_checkpoint.h"
#include "core/io/safetensors.h"
#include "core/model/checkpoint_tensor.h"
#include "core/model/forward_clock.h"
#include "core/model/host_tensor.h"
#include "core/model/llama_layer.h"

#include <ATen/core/grad_mode.h>

namespace draftlab {

namespace {

// Input checks shared by both paths, on host buffers. Throws Error; nothing is written.
void check_feature_layers(const ModelConfig& c, const ForwardOptions& fo) {
  for (int64_t l : fo.feature_layers)
    check(l >= 0 && l < c.num_hidden_layers, [&] {
      return "forward: feature layer " + std::to_string(l) + " outside the target's layers [0, " +
             std::to_string(c.num_hidden_layers) + ")";
    });
}

void check_forward_inputs(const ModelConfig& c, const KvCache& cache, const int64_t* t, const int64_t* p, int64_t n,
                          const uint8_t* mask, int64_t max_positions) {
  check(n > 0, "forward: no tokens");
  cache.check_room(n);
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] < 0 || t[i] >= c.vocab_size)
      throw Error("forward: token id " + std::to_string(t[i]) + " outside the vocabulary [0, " +
                  std::to_string(c.vocab_size) + ")");
    if (p[i] < 0 || p[i] >= max_positions)
      throw Error("forward: position " + std::to_string(p[i]) + " outside the context [0, " +
                  std::to_string(max_positions) + ")");
  }
  if (mask != nullptr)
    for (int64_t i = 0; i < n; ++i)
      check(mask[i * n + i] != 0, "forward: ancestor mask must be true on the diagonal (each token sees itself)");
}

}  // namespace

namespace {

// The native path drops the float32 projections once packed (most of the memory) when the packed copy gives them
// back exactly: the checkpoint's own storage, or float32. Embeddings, norms and the LM head stay.
bool packed_copy_is_exact(WeightStorage packed, WeightStorage stored) {
  return packed == stored || packed == WeightStorage::Float32;
}

}  // namespace

LlamaModel::NativePlan LlamaModel::plan_native(const ModelConfig& config, const ComputeOptions& options,
                                               WeightStorage stored) {
  NativePlan plan;
  const bool native = uses_native_path(options);
  const WeightStorage storage = options.weights.value_or(stored);
  check_block_dot(options.block_dot, native, storage);
  if (!native) return plan;
  if (storage == WeightStorage::Q8_0 || storage == WeightStorage::Q4_0) {
    // Every matrix's rows are whole 32-value blocks: its input width is one of these.
    const std::pair<const char*, int64_t> widths[] = {
        {"hidden_size", config.hidden_size},
        {"intermediate_size", config.intermediate_size},
        {"num_attention_heads x head_dim", config.num_attention_heads * config.head_dim}};
    for (const auto& [field, width] : widths)
      check(width % 32 == 0, [&] {
        return std::string("--weights ") + weight_storage_name(storage) + ": expected " + field +
               " to be a multiple of 32 (ggml's blocks of 32 inputs), got " + std::to_string(width) +
               "; use float16 or float32 weights";
      });
  }
  plan.decoder = std::make_unique<NativeDecoder>(config, storage, options.block_dot);
  plan.release_projections = packed_copy_is_exact(storage, stored);
  return plan;
}

LlamaModel::LlamaModel(ModelConfig config, LlamaWeights weights, ComputeOptions options, WeightStorage stored)
    : LlamaModel(config, std::move(weights), options, plan_native(config, options, stored), /*layers_packed=*/false) {}

LlamaModel::LlamaModel(ModelConfig config, LlamaWeights weights, ComputeOptions options, NativePlan native,
                       bool layers_packed)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      options_(options),
      projections_released_(native.release_projections),
      rope_(config_, options_),
      native_(std::move(native.decoder)) {
  if (!native_) return;
  if (!layers_packed)
    for (auto& layer : weights_.layers) native_->add_layer(layer, projections_released_);
  // The LM head's float32 tensor repeats the packed copy, and so does a tied embedding: dropped with the
  // projections, the forward then reads token rows from the packed LM head.
  native_->set_output(weights_, projections_released_ && config_.tie_word_embeddings);
  if (projections_released_) {
    native_->check_released_exactly(native_->lm_head().exact(), weights_.layers.size());
    weights_.lm_head = at::Tensor();
    if (config_.tie_word_embeddings) weights_.embed = at::Tensor();
  } else {
    weights_.lm_head = column_major(weights_.lm_head);  // the loader left it as read (a no-op when it already is)
  }
  // glibc keeps freed heap pages resident (the packed copy sits above them): hand them back.
  if (projections_released_) return_free_memory_to_os();
}

std::unique_ptr<LlamaModel> LlamaModel::from_checkpoint(ModelConfig config, const TensorLookup& lookup,
                                                        bool rope_pairs, const std::string& source,
                                                        const ComputeOptions& options) {
  NativePlan native = plan_native(config, options, checkpoint_storage(lookup("model.embed_tokens.weight")));
  LayerSink pack;  // each layer packed (and maybe dropped) as it is read: no whole float32 copy at any time
  if (native.decoder)
    pack = [&](LlamaLayerWeights& layer) { native.decoder->add_layer(layer, native.release_projections); };
  try {
    auto weights = load_llama_weights(config, lookup, rope_pairs, source, options, pack);
    return std::unique_ptr<LlamaModel>(
        new LlamaModel(std::move(config), std::move(weights), options, std::move(native), /*layers_packed=*/true));
  } catch (const NativeDecoder::InexactPacking& e) {
    throw Error::at(source, e.what());  // the packing check cannot know which file it is reading
  }
}

int64_t LlamaModel::num_parameters() const {
  // Every shape follows from the config (loading checks them), whether or not the projections are in memory.
  const ModelConfig& c = config_;
  const int64_t d = c.hidden_size, hd = c.head_dim;
  const int64_t mlp = c.mixture_of_experts() ? c.num_local_experts * (3 * c.intermediate_size * d + d)
                                             : 3 * c.intermediate_size * d;
  const int64_t per_layer = 2 * d + (c.num_attention_heads + 2 * c.num_key_value_heads) * hd * d +
                            c.num_attention_heads * hd * d + mlp;
  return c.vocab_size * d * (c.tie_word_embeddings ? 1 : 2) + d + c.num_hidden_layers * per_layer;
}

bool LlamaModel::holds_projections() const {
  return weights_.layers.empty() || weights_.layers[0].wqkv.defined();
}

const LlamaWeights& LlamaModel::weights() const {
  if (projections_released_) {
    std::call_once(projections_restored_, [this] { native_->restore_projections(weights_); });
    restore_outputs();
  }
  return weights_;
}

void LlamaModel::restore_outputs() const {
  std::call_once(outputs_restored_, [this] {
    weights_.lm_head = unpack_matrix(native_->lm_head());  // column-major, as loaded
    if (config_.tie_word_embeddings) weights_.embed = weights_.lm_head.contiguous();
  });
}

const at::Tensor& LlamaModel::embedding() const {
  if (projections_released_ && config_.tie_word_embeddings) restore_outputs();
  return weights_.embed;
}

const at::Tensor& LlamaModel::lm_head() const {
  if (projections_released_) restore_outputs();
  return weights_.lm_head;
}

void LlamaModel::embedding_rows(const int64_t* tokens, int64_t n, float* out, int64_t ld) const {
  check(native_ != nullptr, "LlamaModel::embedding_rows: the model is not on the native path");
  native_->embed(weights_, tokens, n, out, ld);
}

LlamaModel::~LlamaModel() = default;

std::string LlamaModel::path_description() const {
  // The KV cache is named only when it differs from the activations (results files record this string).
  const std::string cache = options_.kv_cache_dtype() == options_.dtype
                                ? ""
                                : ", " + compute_dtype_name(options_.kv_cache_dtype()) + " KV cache";
  if (native_) return native_path_description(native_->storage(), native_->dot()) + cache;
  return "reference (libtorch), " + compute_dtype_name(options_.dtype) + " on " + options_.device.str() + cache;
}

KvCache LlamaModel::make_cache(int64_t capacity) const {
  return KvCache(config_.num_hidden_layers, config_.num_key_value_heads, config_.head_dim, capacity, options_);
}

ForwardOutput LlamaModel::forward(KvCache& cache, const at::Tensor& tokens, const at::Tensor& positions,
                                  const at::Tensor& ancestor_mask, const ForwardOptions& fo) const {
  check(tokens.defined() && tokens.dim() == 1 && tokens.size(0) > 0, "forward: tokens must be a non-empty 1-D tensor");
  const int64_t n = tokens.size(0);
  check(positions.defined() && positions.dim() == 1 && positions.size(0) == n,
        "forward: positions must have one entry per token");
  check(tokens.scalar_type() == at::kLong && positions.scalar_type() == at::kLong,
        "forward: tokens and positions must be int64");
  at::Tensor mask;
  if (ancestor_mask.defined()) {
    check(ancestor_mask.dim() == 2 && ancestor_mask.size(0) == n && ancestor_mask.size(1) == n,
          [&] { return "forward: ancestor mask must be [n, n] for n = " + std::to_string(n); });
    mask = to_host(ancestor_mask, at::kBool);
  }
  static_assert(sizeof(bool) == 1, "bool masks are read as bytes");
  const auto t = to_host(tokens, at::kLong), p = to_host(positions, at::kLong);
  return forward(cache, t.data_ptr<int64_t>(), p.data_ptr<int64_t>(), n,
                 mask.defined() ? reinterpret_cast<const uint8_t*>(mask.data_ptr<bool>()) : nullptr, fo);
}

ForwardOutput LlamaModel::forward(KvCache& cache, const int64_t* tokens, const int64_t* positions, int64_t n,
                                  const uint8_t* ancestor_mask, const ForwardOptions& fo) const {
  return std::move(forward_batch({SequenceRows{&cache, tokens, positions, n, ancestor_mask}}, fo)[0]);
}

std::vector<ForwardOutput> LlamaModel::forward_batch(const std::vector<SequenceRows>& sequences,
                                                     const ForwardOptions& fo) const {
  ForwardClock::Scope forward_clock;
  check(!sequences.empty(), "forward_batch: no sequences");
  std::vector<const KvCache*> caches;
  for (const SequenceRows& s : sequences) caches.push_back(s.cache);
  check_distinct_caches(caches, "forward_batch");
  for (const SequenceRows& s : sequences) {
    check_forward_inputs(config_, *s.cache, s.tokens, s.positions, s.n, s.ancestor_mask, rope_.max_positions());
  }
  check(sequences.size() == 1 || fo.logits != ForwardOptions::Logits::Rows,
        "forward_batch: Logits::Rows takes one sequence");
  check_feature_layers(config_, fo);
  // (A dropped embedding is never trained: weights() would have rebuilt it.)
  if (native_ && !(at::GradMode::is_enabled() && weights_.embed.defined() && weights_.embed.requires_grad()))
    return native_->forward_batch(weights_, rope_, sequences, fo);
  // The reference path: one sequence after another, reading tensors (copies of the buffers: it is never the
  // per-token hot path on the CPU).
  const auto longs = at::TensorOptions().dtype(at::kLong);
  std::vector<ForwardOutput> outs;
  int64_t experts_read = 0;
  for (const SequenceRows& s : sequences) {
    at::Tensor mask;
    if (s.ancestor_mask != nullptr)
      mask = at::from_blob(const_cast<uint8_t*>(s.ancestor_mask), {s.n, s.n}, at::kByte).to(at::kBool);
    outs.push_back(reference_forward(*s.cache, at::from_blob(const_cast<int64_t*>(s.tokens), {s.n}, longs).clone(),
                                     at::from_blob(const_cast<int64_t*>(s.positions), {s.n}, longs).clone(), mask, fo));
    experts_read += outs.back().experts_read;
  }
  for (auto& out : outs) out.experts_read = experts_read;
  return outs;
}

ForwardOutput LlamaModel::reference_forward(KvCache& cache, const at::Tensor& tokens_in,
                                            const at::Tensor& positions_in, const at::Tensor& ancestor_mask,
                                            const ForwardOptions& fo) const {
  const ModelConfig& c = config_;
  const LlamaWeights& w = weights();
  const auto tokens = tokens_in.to(options_.device);
  const auto positions = positions_in.to(options_.device);
  const int64_t n = tokens.size(0), start = cache.length(), T = start + n;
  const auto [cos, sin] = rope_.at_positions(positions);
  const auto mask = attention_mask(ancestor_mask, start, n, options_);

  ForwardOutput out;
  std::vector<at::Tensor> captured(fo.feature_layers.size());
  auto h = at::embedding(w.embed, tokens);  // [n, d]
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    h = llama_decoder_layer(h, w.layers[l], c, cache, l, start, cos, sin, mask, /*input_norm=*/true,
                            &out.experts_read);
    for (size_t k = 0; k < fo.feature_layers.size(); ++k)
      if (fo.feature_layers[k] == l) captured[k] = h;
  }
  cache.advance_to(T);

  const auto normed = rms_norm(h, w.norm, c.rms_norm_eps);
  out.features = fo.feature_layers.empty() ? normed : at::cat(captured, 1);
  at::Tensor rows;
  switch (fo.logits) {
    case ForwardOptions::Logits::All: rows = normed; break;
    case ForwardOptions::Logits::Last: rows = normed.narrow(0, n - 1, 1); break;
    case ForwardOptions::Logits::Rows: rows = normed.index_select(0, fo.rows.to(options_.device)); break;
    case ForwardOptions::Logits::None: break;
  }
  if (rows.defined()) out.logits = project(rows, w.lm_head).to(at::kFloat);
  return out;
}

ForwardOutput LlamaModel::forward_chain(KvCache& cache, const std::vector<int64_t>& tokens,
                                        const ForwardOptions& options) const {
  check(!tokens.empty(), "forward_chain: no tokens");
  std::vector<int64_t> positions(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) positions[i] = cache.length() + static_cast<int64_t>(i);
  return forward(cache, tokens.data(), positions.data(), static_cast<int64_t>(tokens.size()), nullptr, options);
}

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path, const ComputeOptions& options) {
  check_supported(options);
  const bool is_bin = path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0 && is_file(path);
  if (is_bin) {
    Llama2cCheckpoint ckpt(path);  // float32, RoPE on consecutive pairs (Meta's layout)
    return from_checkpoint(ckpt.config(), [&](const std::string& n) { return ckpt.find(n); }, /*rope_pairs=*/true,
                           path, options);
  }
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0 && is_file(path)) {
    GgufCheckpoint ckpt(path);  // llama.cpp's layout: RoPE on consecutive pairs
    return from_checkpoint(ckpt.config(), [&](const std::string& n) { return ckpt.find(n); }, /*rope_pairs=*/true,
                           path, options);
  }
  std::string dir = path;
  if (is_file(path)) {
    auto slash = path.find_last_of('/');
    dir = slash == std::string::npos ? "." : path.substr(0, slash);
  } else if (!is_directory(path)) {
    throw Error::at(path, "not found (expected a Hugging Face model folder, a .safetensors file, a llama2.c .bin or a .gguf)");
  }
  const std::string config_path = dir + "/config.json";
  if (!is_file(config_path))
    throw Error::at(config_path, "not found: a Hugging Face model needs config.json beside its safetensors");
  ModelConfig config = load_hf_config(config_path);
  SafetensorsCollection tensors(path);
  return from_checkpoint(std::move(config), [&](const std::string& n) { return tensors.find(n); },
                         /*rope_pairs=*/false, tensors.description(), options);
}

void LlamaModel::save_hf(const std::string& dir, at::ScalarType file_dtype) const {
  check(is_directory(dir), [&] { return dir + ": not a directory"; });
  std::string torch_dtype = file_dtype == at::kFloat ? "float32" : file_dtype == at::kHalf ? "float16" : "bfloat16";
  DType st = file_dtype == at::kFloat ? DType::F32 : file_dtype == at::kHalf ? DType::F16 : DType::BF16;
  auto named = hf_named_tensors(config_, weights(), file_dtype);
  std::vector<TensorToWrite> entries;
  for (const auto& [name, t] : named)
    entries.push_back({name, st, t.sizes().vec(), t.data_ptr(), static_cast<size_t>(t.nbytes())});
  write_safetensors(dir + "/model.safetensors", entries, {{"format", "pt"}});
  write_file_atomically(dir + "/config.json", config_.to_hf_json(torch_dtype).dump(2) + "\n");
}

}  // namespace draftlab
