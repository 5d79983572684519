// The element-wise and attention pieces of a Llama decoder layer over raw float32 rows, torch-free: what the
// native CPU forward (core/model/native_decoder.h) runs between its PackedMatrix products.
//
// Every function treats each of its n rows on its own and in a fixed order (no reduction crosses rows, and a
// reduction within a row never depends on n, on the row's position in the batch or on which keys are masked), so
// a token's results are bit-identical whether it is decoded alone or verified inside a draft tree. Attention adds
// the visible keys in cache order and skips the others: the scores, softmax sums and value sums of a tree node
// equal those vanilla decoding computes for the same token after the accepted path is compacted.
//
// Chosen at run time like PackedMatrix (AVX-512 / AVX2 / portable, best_kernel_isa()).
#pragma once

#include <cstdint>

#include "core/ops/packed_matrix.h"

namespace draftlab {

// out[j] = x[j] / sqrt(mean(x[j]^2) + eps) * weight, rows of width d (strides ldx, ldo). out may equal x.
void rms_norm_rows(const float* x, int64_t ldx, int64_t n, int64_t d, const float* weight, double eps, float* out,
                   int64_t ldo);

// Rotates `heads` heads of head_dim values per row in place (halves convention: pairs (i, i + head_dim / 2)).
// cos/sin: per row a pointer to head_dim / 2 values for that row's position.
void rope_rows(float* x, int64_t ldx, int64_t n, int64_t heads, int64_t head_dim, const float* const* cos,
               const float* const* sin);

// x[j, i] += y[j, i] for rows of width d.
void add_rows(float* x, int64_t ldx, const float* y, int64_t ldy, int64_t n, int64_t d);

// out[j, i] = silu(gate_up[j, i]) * gate_up[j, I + i] for i < I.
void silu_mul_rows(const float* gate_up, int64_t ldg, int64_t n, int64_t I, float* out, int64_t ldo);

// Grouped-query attention of n query rows over a KV cache.
//   q [n, H * hd] (row stride ldq); keys/values of kv head g, row t at k + g * kv_head_stride + t * hd (same for v),
//   float32 elements, or float16 ones (uint16_t bits) when shape.kv_float16, widened exactly; sums are float32;
//   query head h reads kv head h / (H / KVH).
//   visible: n rows of `T` bytes (row stride ldv), nonzero = row j attends to cache row t; nullptr = causal: row j
//   sees rows [0, T - n + j].
//   out [n, H * hd] (row stride ldo). scratch: attention_scratch_floats(T) floats.
// For head_dim 16, 32, 64 and 128 the AVX-512 and AVX2 paths read each cached key and value once per block of
// query items (rows x query heads of one kv head), not once per row.
struct AttentionShape {
  int64_t heads, kv_heads, head_dim;
  int64_t kv_head_stride;  // floats between kv heads in the cache
  float scale;             // 1 / sqrt(head_dim)
  bool kv_float16 = false;  // the cache stores float16 (uint16_t bits), not float32
};
void attention_rows(const float* q, int64_t ldq, int64_t n, const void* k, const void* v, int64_t T,
                    const uint8_t* visible, int64_t ldv, const AttentionShape& shape, float* out, int64_t ldo,
                    float* scratch);
int64_t attention_scratch_floats(int64_t T);

// out[i] = x[i] rounded to float16 (nearest even), as uint16_t bits: rows going into a float16 KV cache.
void float_to_half_rows(const float* x, int64_t count, uint16_t* out);

// Per row of width V (stride ldx): its largest value m (a NaN counts as the largest) and, unless sum_out is null,
// sum_i exp(x[i] - m), a -inf entry adding exactly 0. softmax(x)[i] = exp(x[i] - m) / sum: what drafting and
// greedy decoding read from a vocabulary's logits.
void softmax_stats_rows(const float* x, int64_t ldx, int64_t n, int64_t V, float* max_out, float* sum_out);

// The same, forced onto one code path (tests hold the paths to each other).
void attention_rows(const float* q, int64_t ldq, int64_t n, const void* k, const void* v, int64_t T,
                    const uint8_t* visible, int64_t ldv, const AttentionShape& shape, float* out, int64_t ldo,
                    float* scratch, KernelIsa isa);

}  // namespace draftlab
