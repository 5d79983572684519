// LlamaModel - a Llama-family decoder (embeddings, RMSNorm, RoPE, grouped-query attention, SwiGLU, LM head)
// whose forward appends n tokens to a KvCache under an arbitrary ancestor mask. One call can score a whole
// draft tree: each new token attends to the committed prefix plus the new tokens its mask row allows.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/io/model_config.h"
#include "core/model/compute_options.h"
#include "core/model/kv_cache.h"
#include "core/model/llama_weights.h"
#include "core/model/native_decoder.h"
#include "core/model/rope.h"

namespace draftlab {

struct ForwardOptions {
  enum class Logits { All, Last, Rows, None };
  Logits logits = Logits::All;
  at::Tensor rows;                      // int64 row indices into the new tokens, when logits == Rows
  // Which features to return. Empty: the final normed hidden state (EAGLE-1/2, Medusa, Hydra). Else the raw
  // residual stream after these decoder layers (0-based), concatenated in this order (EAGLE-3's low, middle and
  // high layers): written as the forward runs, no second pass.
  std::vector<int64_t> feature_layers;
};

struct ForwardOutput {
  at::Tensor logits;                // [rows, vocab] float32 (undefined when Logits::None)
  // [n, d]: the final normed hidden state that feeds the LM head (EAGLE's feature); with feature_layers,
  // [n, k d]: those layers' outputs side by side.
  at::Tensor features;
  // Mixture of experts: the (layer, expert) pairs whose weights this forward ran, summed over layers (0 when dense).
  // Decoding one token reads L k of them; verifying a tree reads up to L E.
  int64_t experts_read = 0;
};

// One sequence of a batched forward (LlamaModel::forward_batch): its cache and its new rows, as the host-buffer
// forward takes them. ancestor_mask: [n, n] bytes, nonzero = allowed; nullptr = causal chain.
struct SequenceRows {
  KvCache* cache = nullptr;
  const int64_t* tokens = nullptr;
  const int64_t* positions = nullptr;
  int64_t n = 0;
  const uint8_t* ancestor_mask = nullptr;
};

// Forwards run on the native CPU path (native_decoder.h) when the options allow it, else on libtorch ops (the
// reference path: training, autograd, CUDA, other dtypes). Both give the same ForwardOutput.
class LlamaModel {
 public:
  // stored: how the checkpoint stores its weights; the native path keeps that storage unless options.weights
  // names one (load() passes it; weights made in memory are float32).
  LlamaModel(ModelConfig config, LlamaWeights weights, ComputeOptions options,
             WeightStorage stored = WeightStorage::Float32);
  ~LlamaModel();

  // Loads a Hugging Face folder (config.json + model.safetensors or a sharded index), a .safetensors file with
  // config.json beside it, a llama2.c .bin checkpoint, or a GGUF file of the llama architecture (F32/F16/BF16).
  // Throws Error naming the file and what is wrong.
  static std::unique_ptr<LlamaModel> load(const std::string& path, const ComputeOptions& options);

  // Writes a Hugging Face folder: config.json and model.safetensors in file_dtype (float32/float16/bfloat16).
  void save_hf(const std::string& dir, at::ScalarType file_dtype) const;

  KvCache make_cache(int64_t capacity) const;

  // The forward: several sequences in one pass (one sequence is a batch of one). Each sequence appends its n tokens
  // (host int64) at its cache's rows [cache.length(), +n) with RoPE positions [n]; ancestor_mask n * n bytes,
  // nonzero = row i allows new token j (true on the diagonal), nullptr = causal chain. On the native path every
  // weight is read once for all rows (what makes a batch cheaper than its sequences one by one) and a row's outputs
  // are bit for bit those of the sequence alone; the reference path runs them one after another. Returns one output
  // per sequence, in order (options apply to each; Logits::Rows only for one sequence); experts_read of each is the
  // whole forward's. Throws Error on out-of-range tokens/positions, a malformed mask, a full cache or two sequences
  // sharing a cache; nothing is written then.
  std::vector<ForwardOutput> forward_batch(const std::vector<SequenceRows>& sequences,
                                           const ForwardOptions& options = {}) const;

  // One sequence (forward_batch of one), over host buffers: the decode loop's form, no tensor built for the inputs.
  ForwardOutput forward(KvCache& cache, const int64_t* tokens, const int64_t* positions, int64_t n,
                        const uint8_t* ancestor_mask, const ForwardOptions& options = {}) const;
  // The same over tensors: tokens [n], positions [n] int64, ancestor_mask [n, n] bool (undefined = causal chain).
  ForwardOutput forward(KvCache& cache, const at::Tensor& tokens, const at::Tensor& positions,
                        const at::Tensor& ancestor_mask = {}, const ForwardOptions& options = {}) const;
  // A chain of tokens continuing the cache (positions = cache rows).
  ForwardOutput forward_chain(KvCache& cache, const std::vector<int64_t>& tokens,
                              const ForwardOptions& options = {}) const;

  const ModelConfig& config() const { return config_; }
  const ComputeOptions& options() const { return options_; }
  // On the native path the layer projections live only in the packed copy when it holds the checkpoint's values
  // unchanged (same storage, or float32): the first call rebuilds them as float32 tensors (training, export).
  const LlamaWeights& weights() const;
  // False while the layer projections exist only in the native path's packed copy (weights() rebuilds them).
  bool holds_projections() const;
  // The embedding [vocab, d] and the LM head [vocab, d] (column-major). When the projections are dropped, so are
  // the LM head's float32 tensor and a tied embedding (the packed LM head holds their values): the first call
  // rebuilds them, bit for bit. Per-token code on the native path reads embedding_rows() instead.
  const at::Tensor& embedding() const;
  const at::Tensor& lm_head() const;
  // Native path only: the embedding rows of n tokens into out (float32, row stride ld), read from the packed LM
  // head when the embedding is tied and dropped (nothing is rebuilt).
  void embedding_rows(const int64_t* tokens, int64_t n, float* out, int64_t ld) const;
  int64_t num_parameters() const;

  // The native path's decoder, or nullptr when forwards run on the reference path.
  const NativeDecoder* native() const { return native_.get(); }
  const RotaryEmbedding& rope() const { return rope_; }
  // "native avx512 kernels, float16 weights" or "reference (libtorch), float32".
  std::string path_description() const;

 private:
  // The native path's decoder before it is filled (null on the reference path), and whether the float32
  // projections can be dropped once packed.
  struct NativePlan {
    std::unique_ptr<NativeDecoder> decoder;
    bool release_projections = false;
  };
  static NativePlan plan_native(const ModelConfig& config, const ComputeOptions& options, WeightStorage stored);
  // layers_packed: the loader already packed every layer into native.decoder (load_llama_weights' on_layer).
  LlamaModel(ModelConfig config, LlamaWeights weights, ComputeOptions options, NativePlan native, bool layers_packed);
  // Reads a checkpoint's tensors through `lookup`, packing each layer as it is read on the native path.
  static std::unique_ptr<LlamaModel> from_checkpoint(ModelConfig config, const TensorLookup& lookup, bool rope_pairs,
                                                     const std::string& source, const ComputeOptions& options);

  ForwardOutput reference_forward(KvCache& cache, const at::Tensor& tokens, const at::Tensor& positions,
                                  const at::Tensor& ancestor_mask, const ForwardOptions& options) const;

  ModelConfig config_;
  // While projections_released_: layer projections, lm_head and a tied embed undefined (see weights()).
  mutable LlamaWeights weights_;
  ComputeOptions options_;
  bool projections_released_ = false;
  mutable std::once_flag projections_restored_;
  mutable std::once_flag outputs_restored_;  // the LM head and a tied embedding (released with the projections)
  void restore_outputs() const;
  RotaryEmbedding rope_;
  std::unique_ptr<NativeDecoder> native_;
};


}  // namespace draftlab
