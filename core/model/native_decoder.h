// NativeDecoder - the dispatch-free, allocation-free CPU inference path of a Llama decoder (no-grad forwards of
// the target and of the EAGLE head's layer).
//
// libtorch spends most of a small forward on dispatch, temporaries and separate element-wise ops. Here a whole
// decoder layer runs over raw float32 rows in a workspace allocated once per model: RMSNorm, the fused QKV
// product, RoPE in place, K/V written straight into the KvCache's storage (same layout as the libtorch path),
// attention of n query rows under the tree mask, o-projection + residual, RMSNorm, fused gate/up, SiLU x up,
// down + residual. Weights are PackedMatrix copies in float32, float16 or bfloat16 (float32 accumulation);
// products are split across threads by panels of output columns. Intermediates never allocate once the workspace
// has grown to the largest forward seen; only the outputs (features, logits, captured hidden states) are new tensors,
// since callers keep them across forwards.
//
// The libtorch path (LlamaModel's reference forward) stays for training, autograd, CUDA and other activation
// dtypes; tests hold the two to each other. Both produce the same ForwardOutput.
//
// Row independence (packed_matrix.h, decoder_ops.h): a token's logits do not depend on which other rows share the
// forward or which cache rows are masked out, so tree verification reproduces vanilla decoding bit for bit.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "core/base/error.h"
#include "core/io/model_config.h"
#include "core/model/kv_cache.h"
#include "core/model/llama_weights.h"
#include "core/ops/packed_matrix.h"

namespace draftlab {

class RotaryEmbedding;
struct ForwardOptions;
struct ForwardOutput;
struct SequenceRows;

// One decoder layer's weights, packed. attn_norm is empty when the layer has no input norm (EAGLE's head).
struct NativeLayerWeights {
  std::vector<float> attn_norm, mlp_norm;
  PackedMatrix wqkv, wo, w_gate_up, w_down;
  // Mixture of experts: w_gate_up / w_down empty. The router stays float32 whatever the storage (llama.cpp never
  // quantizes it either: a rounded router changes which experts run).
  PackedMatrix router;
  std::vector<PackedMatrix> expert_gate_up, expert_down;
};
NativeLayerWeights pack_layer(const LlamaLayerWeights& layer, WeightStorage storage, BlockDot dot = BlockDot::Float);

// The packed values as a float32 CPU tensor [out, in] in column-major storage (llama_weights.h's layout).
at::Tensor unpack_matrix(const PackedMatrix& m);

// A weight tensor [out, in] of any strides (any device and dtype; read as float32 on CPU), packed.
PackedMatrix pack_matrix(const at::Tensor& w, WeightStorage storage, BlockDot dot = BlockDot::Float);
// A vector's values as float32 (empty for an undefined tensor).
std::vector<float> float_vector(const at::Tensor& t);

// y[n, W.out] = x[n, W.in] · Wᵀ, panels split across at::get_num_threads() threads of the WorkerPool.
void parallel_multiply(const PackedMatrix& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy);

// One sequence's rows in a layer's forward: workspace rows [row, row + n) go to cache rows [start, start + n).
// visible: [n, start + n] row-major bytes (nonzero = allowed), or nullptr = causal.
struct RowSegment {
  KvCache* cache = nullptr;
  int64_t row = 0, n = 0, start = 0;
  const uint8_t* visible = nullptr;
};

// Scratch rows for one forward of up to n tokens over up to T cache rows, grown on demand, never shrunk.
class NativeWorkspace {
 public:
  // visible_bytes: room for the masks (default n T: one sequence).
  void reserve(const ModelConfig& c, int64_t n, int64_t T, int64_t visible_bytes = -1);
  float* h = nullptr;        // [n, d]   hidden state
  float* normed = nullptr;   // [n, d]
  float* qkv = nullptr;      // [n, (H + 2 KVH) hd]
  float* attn = nullptr;     // [n, H hd]
  float* proj = nullptr;     // [n, d]
  float* gate_up = nullptr;  // [n, 2 I]
  float* act = nullptr;      // [n, I]
  float* scores = nullptr;   // [threads, attention_scratch_floats(T)]
  // Mixture of experts: router logits [n, E], the k chosen experts and weights per row, the rows of one expert.
  float* router_logits = nullptr;  // [n, E]
  float* route_weights = nullptr;  // [n, k]
  float* gathered = nullptr;       // [n, d]  input rows of one expert
  float* expert_out = nullptr;     // [n, d]
  std::vector<int32_t> route_experts;  // [n k]
  std::vector<int32_t> members;        // [n]  rows of one expert
  std::vector<float> member_weights;   // [n]
  uint8_t* visible = nullptr;  // [n, T] (a batch: each masked sequence's [n_s, T_s], end to end)
  std::vector<RowSegment> segments;  // a batched forward's sequences
  std::vector<const float*> cos, sin;  // [n]

 private:
  std::vector<float> floats_;
  std::vector<uint8_t> bytes_;
  int64_t n_ = 0, T_ = 0, threads_ = 0;
};

// Runs one layer over ws.h [rows, d] in place, rows = the segments' rows laid end to end: the projections once over
// every row (a batch reads each weight once), attention per segment against its own cache. ws.cos / ws.sin set per
// row. experts_read: see ForwardOutput::experts_read (mixture of experts only). attention_input, when given, is
// what q/k/v read instead of (normed) ws.h: [rows, L.wqkv.in()] (EAGLE-3's head, llama_decoder_layer's argument).
void native_decoder_layer(const NativeLayerWeights& L, const ModelConfig& c, const std::vector<RowSegment>& segments,
                          int64_t layer, NativeWorkspace& ws, int64_t* experts_read = nullptr,
                          const float* attention_input = nullptr);
// One sequence: n rows at cache rows [start, start + n); visible = ws.visible [n, start + n] when `masked`.
void native_decoder_layer(const NativeLayerWeights& L, const ModelConfig& c, KvCache& cache, int64_t layer,
                          int64_t start, int64_t n, bool masked, NativeWorkspace& ws, int64_t* experts_read = nullptr);

class NativeDecoder {
 public:
  // An empty decoder, filled by add_layer for each layer in order, then set_output (LlamaModel does this, as the
  // checkpoint is read).
  NativeDecoder(const ModelConfig& config, WeightStorage storage, BlockDot dot = BlockDot::Float);

  // Packs the next layer. With release_projections its projection tensors are then dropped (undefined), so the
  // float32 copy and the packed copy never both exist in full; restore_projections brings them back. Only exact
  // when `storage` holds the tensors' values unchanged (the caller decides).
  void add_layer(LlamaLayerWeights& layer, bool release_projections);
  // The final norm and the LM head of `weights` (float32 tensors on CPU). embed_from_lm_head: the embedding is
  // the LM head (tied) and the packed copy holds its values unchanged, so token rows are read from the packed LM
  // head and weights.embed is never read (the model may drop it).
  void set_output(const LlamaWeights& weights, bool embed_from_lm_head = false);

  // Embedding rows of n tokens into out (row stride ld): from weights.embed, or from the packed LM head.
  void embed(const LlamaWeights& weights, const int64_t* tokens, int64_t n, float* out, int64_t ld) const;

  // Sets every layer's wqkv / wo / w_gate_up / w_down in `weights` to the packed values (float32, column-major).
  void restore_projections(LlamaWeights& weights) const;

  // The forward of LlamaModel::forward_batch (inputs already checked by the caller): every sequence's rows in one
  // pass over the weights.
  std::vector<ForwardOutput> forward_batch(const LlamaWeights& weights, const RotaryEmbedding& rope,
                                           const std::vector<SequenceRows>& sequences,
                                           const ForwardOptions& options) const;

  // Logits [rows, vocab] of rows of final features (float32, row stride ld), through the packed LM head.
  at::Tensor lm_head_logits(const float* features, int64_t ld, int64_t rows) const;

  WeightStorage storage() const { return storage_; }
  BlockDot dot() const { return dot_; }
  // Throws InexactPacking naming the layer (layer = the number of layers: the LM head) unless `exact`: the caller
  // is about to drop float32 values only the packed copy would hold.
  struct InexactPacking : Error {
    using Error::Error;
  };
  void check_released_exactly(bool exact, size_t layer) const;
  const PackedMatrix& lm_head() const { return lm_head_; }
  int64_t weight_bytes() const;  // bytes of the packed weights (projections, every expert, LM head)

 private:
  ModelConfig config_;
  WeightStorage storage_;
  BlockDot dot_;
  std::vector<NativeLayerWeights> layers_;
  std::vector<float> norm_;
  PackedMatrix lm_head_;
  bool embed_from_lm_head_ = false;
  mutable std::mutex mutex_;  // one forward at a time: the workspace is shared
  mutable NativeWorkspace ws_;
};

// The CPU and build facts behind the native path, for --verbose and results files: "avx512 (float16 weights)".
std::string native_path_description(WeightStorage storage, BlockDot dot = BlockDot::Float);

}  // namespace draftlab
