#include "core/model/native_decoder.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/base/error.h"
#include "core/model/llama_model.h"
#include "core/model/mixture_of_experts.h"
#include "core/model/rope.h"
#include "core/ops/decoder_ops.h"
#include "core/ops/worker_pool.h"

namespace draftlab {

std::vector<float> float_vector(const at::Tensor& t) {
  if (!t.defined()) return {};
  const auto c = t.to(at::kCPU, at::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

PackedMatrix pack_matrix(const at::Tensor& w, WeightStorage storage, BlockDot dot) {
  const auto f = w.to(at::kCPU, at::kFloat);
  return PackedMatrix(f.data_ptr<float>(), f.size(0), f.size(1), f.stride(0), f.stride(1), storage, dot);
}

at::Tensor unpack_matrix(const PackedMatrix& m) {
  auto physical = at::empty({m.in(), m.out()}, at::TensorOptions().dtype(at::kFloat));  // [in, out]
  float* p = physical.data_ptr<float>();
  for (int64_t i = 0; i < m.in(); ++i)
    for (int64_t o = 0; o < m.out(); ++o) p[i * m.out() + o] = m.at(o, i);
  return physical.t();
}

NativeLayerWeights pack_layer(const LlamaLayerWeights& L, WeightStorage storage, BlockDot dot) {
  NativeLayerWeights out;
  out.attn_norm = float_vector(L.attn_norm);
  out.mlp_norm = float_vector(L.mlp_norm);
  out.wqkv = pack_matrix(L.wqkv, storage, dot);
  out.wo = pack_matrix(L.wo, storage, dot);
  if (L.router.defined()) {
    out.router = pack_matrix(L.router, WeightStorage::Float32);
    for (const auto& e : L.expert_gate_up) out.expert_gate_up.push_back(pack_matrix(e, storage, dot));
    for (const auto& e : L.expert_down) out.expert_down.push_back(pack_matrix(e, storage, dot));
  } else {
    out.w_gate_up = pack_matrix(L.w_gate_up, storage, dot);
    out.w_down = pack_matrix(L.w_down, storage, dot);
  }
  return out;
}

// The native path's threads: at::get_num_threads() of them (--threads), from the WorkerPool, not libtorch's.
static int native_threads(int64_t units, int64_t per_thread) {
  const int64_t useful = (units + per_thread - 1) / per_thread;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), useful)));
}

void parallel_multiply(const PackedMatrix& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy) {
  if (w.dot() == BlockDot::Int8) {  // x quantized once, before the threads split the panels
    thread_local QuantizedRows buffer;
    QuantizedRows& quantized = buffer;  // this thread's: a thread_local named inside the lambda is the worker's
    quantize_rows(x, ldx, n, w.in(), quantized);
    WorkerPool::instance().run(native_threads(w.panels(), 8), [&](int t, int threads) {
      const auto [p0, p1] = WorkerPool::split(0, w.panels(), threads, t);
      w.multiply(quantized, y, ldy, p0, p1);
    });
    return;
  }
  // At least 8 panels (128 columns) per thread: smaller splits cost more in hand-off than they save.
  WorkerPool::instance().run(native_threads(w.panels(), 8), [&](int t, int threads) {
    const auto [p0, p1] = WorkerPool::split(0, w.panels(), threads, t);
    w.multiply(x, ldx, n, y, ldy, p0, p1);
  });
}

void NativeWorkspace::reserve(const ModelConfig& c, int64_t n, int64_t T, int64_t visible_bytes) {
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  if (visible_bytes < 0) visible_bytes = n * T;
  if (n <= n_ && T <= T_ && threads <= threads_ && visible_bytes <= static_cast<int64_t>(bytes_.size())) return;
  n_ = std::max(n, n_);
  T_ = std::max(T, T_);
  threads_ = std::max(threads, threads_);
  const int64_t d = c.hidden_size, hd = c.head_dim, H = c.num_attention_heads, KVH = c.num_key_value_heads;
  const int64_t I = c.intermediate_size, E = c.num_local_experts, k = c.num_experts_per_tok;
  // One block, each buffer rounded to 16 floats (64 bytes).
  auto round = [](int64_t f) { return (f + 15) / 16 * 16; };
  const int64_t sizes[] = {n_ * d, n_ * d, n_ * (H + 2 * KVH) * hd, n_ * H * hd, n_ * d, n_ * 2 * I, n_ * I,
                           threads_ * attention_scratch_floats(T_), n_ * E, n_ * k, n_ * d, n_ * d};
  int64_t total = 16;
  for (int64_t s : sizes) total += round(s);
  floats_.assign(static_cast<size_t>(total), 0.0f);
  float* p = floats_.data();
  p += (16 - (reinterpret_cast<uintptr_t>(p) / 4) % 16) % 16;  // 64-byte align
  float** slots[] = {&h, &normed, &qkv, &attn, &proj, &gate_up, &act, &scores,
                     &router_logits, &route_weights, &gathered, &expert_out};
  static_assert(sizeof(slots) / sizeof(slots[0]) == sizeof(sizes) / sizeof(sizes[0]), "a size per buffer");
  for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); ++i) {
    *slots[i] = p;
    p += round(sizes[i]);
  }
  route_experts.assign(static_cast<size_t>(n_ * k), 0);
  members.assign(static_cast<size_t>(n_), 0);
  member_weights.assign(static_cast<size_t>(n_), 0.0f);
  bytes_.assign(static_cast<size_t>(std::max(n_ * T_, std::max<int64_t>(visible_bytes, bytes_.size()))), 0);
  visible = bytes_.data();
  cos.resize(static_cast<size_t>(n_));
  sin.resize(static_cast<size_t>(n_));
}

namespace {

// The mixture-of-experts MLP (mixture_of_experts.h's rule) over ws.normed [n, d] into ws.proj [n, d]: rows routed
// on their own, each expert run once over the rows that chose it, outputs added per row in ascending expert index.
void native_mixture_of_experts(const NativeLayerWeights& L, const ModelConfig& c, int64_t n, NativeWorkspace& ws,
                               int64_t* experts_read) {
  const int64_t d = c.hidden_size, I = c.intermediate_size, E = c.num_local_experts, k = c.num_experts_per_tok;
  parallel_multiply(L.router, ws.normed, d, n, ws.router_logits, E);
  route_rows(ws.router_logits, n, E, k, ws.route_experts.data(), ws.route_weights);
  std::fill(ws.proj, ws.proj + n * d, 0.0f);
  for (int64_t e = 0; e < E; ++e) {
    int64_t m = 0;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t s = 0; s < k; ++s)
        if (ws.route_experts[j * k + s] == e) {
          ws.members[m] = static_cast<int32_t>(j);
          ws.member_weights[m++] = ws.route_weights[j * k + s];
        }
    if (m == 0) continue;
    if (experts_read) ++*experts_read;
    const float* in = ws.normed;  // every row chose e: no gather
    if (m < n) {
      for (int64_t r = 0; r < m; ++r) std::memcpy(ws.gathered + r * d, ws.normed + ws.members[r] * d, d * sizeof(float));
      in = ws.gathered;
    }
    parallel_multiply(L.expert_gate_up[e], in, d, m, ws.gate_up, 2 * I);
    silu_mul_rows(ws.gate_up, 2 * I, m, I, ws.act, I);
    parallel_multiply(L.expert_down[e], ws.act, I, m, ws.expert_out, d);
    for (int64_t r = 0; r < m; ++r) {
      float* y = ws.proj + ws.members[r] * d;
      const float* x = ws.expert_out + r * d;
      const float w = ws.member_weights[r];
      for (int64_t i = 0; i < d; ++i) y[i] += w * x[i];
    }
  }
}

}  // namespace

void native_decoder_layer(const NativeLayerWeights& L, const ModelConfig& c, const std::vector<RowSegment>& segments,
                          int64_t layer, NativeWorkspace& ws, int64_t* experts_read, const float* attention_input) {
  const int64_t d = c.hidden_size, hd = c.head_dim, H = c.num_attention_heads, KVH = c.num_key_value_heads;
  const int64_t I = c.intermediate_size, qkv_width = (H + 2 * KVH) * hd;
  int64_t n = 0, T_max = 0;
  for (const RowSegment& s : segments) {
    n += s.n;
    T_max = std::max(T_max, s.start + s.n);
  }

  // Attention block.
  const float* attn_in = ws.h;
  int64_t attn_width = d;
  if (attention_input != nullptr) {
    attn_in = attention_input;
    attn_width = L.wqkv.in();
  } else if (!L.attn_norm.empty()) {
    rms_norm_rows(ws.h, d, n, d, L.attn_norm.data(), c.rms_norm_eps, ws.normed, d);
    attn_in = ws.normed;
  }
  parallel_multiply(L.wqkv, attn_in, attn_width, n, ws.qkv, qkv_width);
  rope_rows(ws.qkv, qkv_width, n, H + KVH, hd, ws.cos.data(), ws.sin.data());  // q and k heads are adjacent
  for (const RowSegment& s : segments) {
    void* kc = s.cache->key_data(layer);
    void* vc = s.cache->value_data(layer);
    const int64_t hs = s.cache->head_stride();
    const bool half = s.cache->float16_storage();
    for (int64_t j = 0; j < s.n; ++j) {
      const float* qkv_row = ws.qkv + (s.row + j) * qkv_width;
      for (int64_t g = 0; g < KVH; ++g) {
        const int64_t at = g * hs + (s.start + j) * hd;
        const float* k_row = qkv_row + (H + g) * hd;
        const float* v_row = qkv_row + (H + KVH + g) * hd;
        if (half) {
          float_to_half_rows(k_row, hd, static_cast<uint16_t*>(kc) + at);
          float_to_half_rows(v_row, hd, static_cast<uint16_t*>(vc) + at);
        } else {
          std::memcpy(static_cast<float*>(kc) + at, k_row, hd * sizeof(float));
          std::memcpy(static_cast<float*>(vc) + at, v_row, hd * sizeof(float));
        }
      }
    }
  }
  // Rows split across threads (each thread its own scores scratch), a thread's range crossing sequences where it
  // must; a row's result does not depend on the split. (A single row runs inline: a hand-off costs more than one
  // row's attention.)
  WorkerPool::instance().run(native_threads(n, 2), [&](int t, int threads) {
    const auto [j0, j1] = WorkerPool::split(0, n, threads, t);
    float* scratch = ws.scores + t * attention_scratch_floats(T_max);
    for (const RowSegment& s : segments) {
      const int64_t a = std::max(j0, s.row) - s.row, b = std::min(j1, s.row + s.n) - s.row;  // local rows
      if (a >= b) continue;
      const int64_t T = s.start + s.n;
      AttentionShape shape{H, KVH, hd, s.cache->head_stride(),
                           static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)))};
      shape.kv_float16 = s.cache->float16_storage();
      const void* kc = s.cache->key_data(layer);
      const void* vc = s.cache->value_data(layer);
      const float* q = ws.qkv + (s.row + a) * qkv_width;
      float* out = ws.attn + (s.row + a) * H * hd;
      if (s.visible != nullptr) {
        attention_rows(q, qkv_width, b - a, kc, vc, T, s.visible + a * T, T, shape, out, H * hd, scratch);
      } else {
        // Causal rows a..b of n: present them as the last rows of a shorter cache so "causal" stays correct.
        attention_rows(q, qkv_width, b - a, kc, vc, s.start + b, nullptr, 0, shape, out, H * hd, scratch);
      }
    }
  });
  parallel_multiply(L.wo, ws.attn, H * hd, n, ws.proj, d);
  add_rows(ws.h, d, ws.proj, d, n, d);

  // MLP block.
  rms_norm_rows(ws.h, d, n, d, L.mlp_norm.data(), c.rms_norm_eps, ws.normed, d);
  if (!L.router.empty()) {
    native_mixture_of_experts(L, c, n, ws, experts_read);
  } else {
    parallel_multiply(L.w_gate_up, ws.normed, d, n, ws.gate_up, 2 * I);
    silu_mul_rows(ws.gate_up, 2 * I, n, I, ws.act, I);
    parallel_multiply(L.w_down, ws.act, I, n, ws.proj, d);
  }
  add_rows(ws.h, d, ws.proj, d, n, d);
}

void native_decoder_layer(const NativeLayerWeights& L, const ModelConfig& c, KvCache& cache, int64_t layer,
                          int64_t start, int64_t n, bool masked, NativeWorkspace& ws, int64_t* experts_read) {
  ws.segments.assign(1, RowSegment{&cache, 0, n, start, masked ? ws.visible : nullptr});
  native_decoder_layer(L, c, ws.segments, layer, ws, experts_read);
}

NativeDecoder::NativeDecoder(const ModelConfig& config, WeightStorage storage, BlockDot dot)
    : config_(config), storage_(storage), dot_(dot) {}

void NativeDecoder::add_layer(LlamaLayerWeights& L, bool release_projections) {
  layers_.push_back(pack_layer(L, storage_, dot_));
  const NativeLayerWeights& packed = layers_.back();
  if (release_projections) {
    bool exact = packed.wqkv.exact() && packed.wo.exact() && packed.w_gate_up.exact() && packed.w_down.exact();
    for (const auto& e : packed.expert_gate_up) exact = exact && e.exact();
    for (const auto& e : packed.expert_down) exact = exact && e.exact();
    check_released_exactly(exact, layers_.size() - 1);
    L.wqkv = L.wo = L.w_gate_up = L.w_down = L.router = at::Tensor();
    L.expert_gate_up.clear();
    L.expert_down.clear();
  }
}

void NativeDecoder::check_released_exactly(bool exact, size_t layer) const {
  // Only a Q8_0 / Q4_0 file whose blocks are not ggml's own quantization (re-quantizing its values gives other
  // blocks) gets here: its float32 values would be lost.
  if (exact) return;
  const std::string what = layer < layers_.size() ? "layer " + std::to_string(layer) : std::string("the LM head");
  throw InexactPacking(std::string(weight_storage_name(storage_)) + " packing of " + what +
                       ": expected the file's blocks to re-quantize to themselves, got other blocks (not quantized "
                       "as ggml does); load it with --weights float32");
}

void NativeDecoder::set_output(const LlamaWeights& weights, bool embed_from_lm_head) {
  norm_ = float_vector(weights.norm);
  lm_head_ = pack_matrix(weights.lm_head, storage_, dot_);
  embed_from_lm_head_ = embed_from_lm_head;
}

void NativeDecoder::embed(const LlamaWeights& weights, const int64_t* tokens, int64_t n, float* out,
                          int64_t ld) const {
  const int64_t d = config_.hidden_size;
  if (embed_from_lm_head_) {
    for (int64_t j = 0; j < n; ++j) lm_head_.row(tokens[j], out + j * ld);
    return;
  }
  const float* table = weights.embed.data_ptr<float>();
  for (int64_t j = 0; j < n; ++j) std::memcpy(out + j * ld, table + tokens[j] * d, d * sizeof(float));
}

void NativeDecoder::restore_projections(LlamaWeights& weights) const {
  for (size_t l = 0; l < layers_.size(); ++l) {
    auto& L = weights.layers[l];
    const NativeLayerWeights& P = layers_[l];
    L.wqkv = unpack_matrix(P.wqkv);
    L.wo = unpack_matrix(P.wo);
    if (!P.router.empty()) {
      L.router = unpack_matrix(P.router);
      L.expert_gate_up.clear();
      L.expert_down.clear();
      for (const auto& e : P.expert_gate_up) L.expert_gate_up.push_back(unpack_matrix(e));
      for (const auto& e : P.expert_down) L.expert_down.push_back(unpack_matrix(e));
    } else {
      L.w_gate_up = unpack_matrix(P.w_gate_up);
      L.w_down = unpack_matrix(P.w_down);
    }
  }
}

int64_t NativeDecoder::weight_bytes() const {
  int64_t b = lm_head_.bytes();
  for (const auto& L : layers_) {
    b += L.wqkv.bytes() + L.wo.bytes() + L.w_gate_up.bytes() + L.w_down.bytes() + L.router.bytes();
    for (const auto& e : L.expert_gate_up) b += e.bytes();
    for (const auto& e : L.expert_down) b += e.bytes();
  }
  return b;
}

at::Tensor NativeDecoder::lm_head_logits(const float* features, int64_t ld, int64_t rows) const {
  auto logits = at::empty({rows, lm_head_.out()}, at::TensorOptions().dtype(at::kFloat));
  parallel_multiply(lm_head_, features, ld, rows, logits.data_ptr<float>(), lm_head_.out());
  return logits;
}

std::vector<ForwardOutput> NativeDecoder::forward_batch(const LlamaWeights& weights, const RotaryEmbedding& rope,
                                                        const std::vector<SequenceRows>& sequences,
                                                        const ForwardOptions& fo) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const ModelConfig& c = config_;
  const int64_t d = c.hidden_size, B = static_cast<int64_t>(sequences.size());
  int64_t n = 0, T_max = 0, visible_bytes = 0;
  for (const SequenceRows& s : sequences) {
    const int64_t T = s.cache->length() + s.n;
    n += s.n;
    T_max = std::max(T_max, T);
    if (s.ancestor_mask != nullptr && s.n > 1) visible_bytes += s.n * T;
  }
  NativeWorkspace& ws = ws_;
  ws.reserve(c, n, T_max, visible_bytes);

  // Inputs: embeddings, RoPE rows, the visibility of every cache row for each new row of a masked sequence.
  const int64_t half = c.head_dim / 2;
  const float* cos_table = rope.cos_table().data_ptr<float>();
  const float* sin_table = rope.sin_table().data_ptr<float>();
  ws.segments.clear();
  int64_t row = 0;
  uint8_t* visible = ws.visible;
  for (const SequenceRows& s : sequences) {
    const int64_t start = s.cache->length(), T = start + s.n;
    embed(weights, s.tokens, s.n, ws.h + row * d, d);
    for (int64_t j = 0; j < s.n; ++j) {
      ws.cos[row + j] = cos_table + s.positions[j] * half;
      ws.sin[row + j] = sin_table + s.positions[j] * half;
    }
    RowSegment segment{s.cache, row, s.n, start, nullptr};
    if (s.ancestor_mask != nullptr && s.n > 1) {
      for (int64_t j = 0; j < s.n; ++j) {
        std::memset(visible + j * T, 1, static_cast<size_t>(start));
        std::memcpy(visible + j * T + start, s.ancestor_mask + j * s.n, static_cast<size_t>(s.n));
      }
      segment.visible = visible;
      visible += s.n * T;
    }
    ws.segments.push_back(segment);
    row += s.n;
  }

  std::vector<ForwardOutput> outs(static_cast<size_t>(B));
  int64_t experts_read = 0;
  const auto K = static_cast<int64_t>(fo.feature_layers.size());
  at::Tensor captured;  // [n, K d] when feature_layers are asked for
  if (K > 0) captured = at::empty({n, K * d}, at::TensorOptions().dtype(at::kFloat));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    native_decoder_layer(layers_[l], c, ws.segments, l, ws, &experts_read);
    for (size_t k = 0; k < fo.feature_layers.size(); ++k) {  // the residual after layer l, into column block k
      if (fo.feature_layers[k] != l) continue;
      float* f = captured.data_ptr<float>();
      for (int64_t r = 0; r < n; ++r) std::memcpy(f + (r * K + k) * d, ws.h + r * d, d * sizeof(float));
    }
  }
  for (const RowSegment& s : ws.segments) s.cache->advance_to(s.start + s.n);

  // Final norm over every row; each sequence's features (and logits) are its rows of one tensor.
  auto features = at::empty({n, d}, at::TensorOptions().dtype(at::kFloat));
  rms_norm_rows(ws.h, d, n, d, norm_.data(), c.rms_norm_eps, features.data_ptr<float>(), d);
  at::Tensor logits;
  switch (fo.logits) {
    case ForwardOptions::Logits::All: logits = lm_head_logits(features.data_ptr<float>(), d, n); break;
    case ForwardOptions::Logits::Last: {
      // Each sequence's last row, gathered (one row already is).
      const float* rows = features.data_ptr<float>() + (n - 1) * d;
      if (B > 1) {
        for (int64_t b = 0; b < B; ++b) {
          const RowSegment& s = ws.segments[b];
          std::memcpy(ws.normed + b * d, features.data_ptr<float>() + (s.row + s.n - 1) * d, d * sizeof(float));
        }
        rows = ws.normed;
      }
      logits = lm_head_logits(rows, d, B);
      break;
    }
    case ForwardOptions::Logits::Rows: {
      check(B == 1, "forward: Logits::Rows takes one sequence");
      const auto selected = features.index_select(0, fo.rows.to(at::kCPU, at::kLong)).contiguous();
      logits = lm_head_logits(selected.data_ptr<float>(), d, selected.size(0));
      break;
    }
    case ForwardOptions::Logits::None: break;
  }
  for (int64_t b = 0; b < B; ++b) {
    const RowSegment& s = ws.segments[b];
    ForwardOutput& out = outs[b];
    out.experts_read = experts_read;
    const at::Tensor& f = K > 0 ? captured : features;
    out.features = B == 1 ? f : f.narrow(0, s.row, s.n);
    if (!logits.defined()) continue;
    if (B == 1)
      out.logits = logits;
    else if (fo.logits == ForwardOptions::Logits::Last)
      out.logits = logits.narrow(0, b, 1);
    else
      out.logits = logits.narrow(0, s.row, s.n);
  }
  return outs;
}

std::string native_path_description(WeightStorage storage, BlockDot dot) {
  std::string d = std::string("native ") + kernel_isa_name(best_kernel_isa()) + " kernels, " +
                  weight_storage_name(storage) + " weights";
  if (dot == BlockDot::Int8) d += std::string(", int8 dot products (") + int8_dot_instruction(best_kernel_isa()) + ")";
  return d;
}

}  // namespace draftlab
