// Decoder-layer pieces over raw rows. Each body is written once as plain loops (fixed 16-lane partial sums where
// a row reduces, so the compiler vectorises them without reassociating anything) and compiled three times: for
// AVX-512, AVX2 + FMA and baseline x86-64, picked at run time. Within one process every row always runs the same
// instructions, which is what row independence needs (see decoder_ops.h).
#include "core/ops/decoder_ops.h"
#include "core/ops/unroll.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

// GCC 12 warns inside its own AVX-512 intrinsics (an intentionally undefined pass-through operand).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The 64-byte vector helpers below are always inlined into ISA-specific functions: no call passes one by value.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace draftlab {
namespace {

#define DRAFTLAB_INLINE inline __attribute__((always_inline))
#if defined(__x86_64__)
#define DRAFTLAB_T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define DRAFTLAB_T256 __attribute__((target("avx2,fma,f16c")))
#endif

constexpr int kLanes = 16;

// exp(x) for x <= 0 (softmax after subtracting the max): 2^(x log2 e) split into an integer power of two and a
// degree-6 polynomial on [-0.5, 0.5]; relative error ~2e-7 (1-2 ulp). Written once for a float (F = float,
// I = int32_t) and for GCC vectors of them (the shared attention pass), element-wise, so loops of it vectorise.
// Rounding adds and removes 1.5 * 2^23 (exact for |t| < 2^22): nearbyint's result in the default rounding mode,
// but GCC vectorises this under AVX2 too (nearbyint it left scalar there: SiLU over a 64-row forward then cost
// more than its products).
template <class F>
struct IntLanes {
  typedef int32_t type __attribute__((vector_size(sizeof(F))));
};
template <class F>
DRAFTLAB_INLINE typename IntLanes<F>::type to_int(F f) {
  return __builtin_convertvector(f, typename IntLanes<F>::type);
}
DRAFTLAB_INLINE int32_t to_int(float f) { return static_cast<int32_t>(f); }

template <class F>
DRAFTLAB_INLINE F exp_nonpositive(F x) {
  const F low = F{} - 87.0f;
  x = x > low ? x : low;
  const F t = x * 1.44269504088896341f;
  const F magic = F{} + 12582912.0f;
  const F fi = (t + magic) - magic;
  const F f = t - fi;  // [-0.5, 0.5]
  F p = F{} + 1.535336188319500e-4f;
  p = p * f + 1.339887440266574e-3f;
  p = p * f + 9.618437357674640e-3f;
  p = p * f + 5.550332471162809e-2f;
  p = p * f + 2.402264791363012e-1f;
  p = p * f + 6.931472028550421e-1f;
  p = p * f + 1.0f;
  const auto bits = (to_int(fi) + 127) << 23;
  F scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// A cached key or value element as float32: the float16 cache is widened exactly.
DRAFTLAB_INLINE float kv_value(const float* p, int64_t i) { return p[i]; }
DRAFTLAB_INLINE float kv_value(const uint16_t* p, int64_t i) { return half_to_float(p[i]); }

// sum_i a[i] * b[i] with 16 lane partial sums reduced in a fixed order.
template <class B>
DRAFTLAB_INLINE float dot(const float* a, const B* b, int64_t len) {
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= len; i += kLanes)
    for (int c = 0; c < kLanes; ++c) lane[c] += a[i + c] * kv_value(b, i + c);
  for (int c = 0; i < len; ++i, ++c) lane[c] += a[i] * kv_value(b, i);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int c = 0; c < w; ++c) lane[c] += lane[c + w];
  return lane[0];
}

DRAFTLAB_INLINE void rms_norm_body(const float* x, int64_t ldx, int64_t n, int64_t d, const float* weight,
                                   double eps, float* out, int64_t ldo) {
  for (int64_t j = 0; j < n; ++j) {
    const float* xr = x + j * ldx;
    float* o = out + j * ldo;
    const float ms = dot(xr, xr, d) / static_cast<float>(d);
    const float inv = 1.0f / std::sqrt(ms + static_cast<float>(eps));
    for (int64_t i = 0; i < d; ++i) o[i] = (xr[i] * inv) * weight[i];
  }
}

DRAFTLAB_INLINE void rope_body(float* x, int64_t ldx, int64_t n, int64_t heads, int64_t hd, const float* const* cos,
                               const float* const* sin) {
  const int64_t half = hd / 2;
  for (int64_t j = 0; j < n; ++j) {
    const float* c = cos[j];
    const float* s = sin[j];
    for (int64_t h = 0; h < heads; ++h) {
      float* x1 = x + j * ldx + h * hd;
      float* x2 = x1 + half;
      for (int64_t i = 0; i < half; ++i) {
        const float a = x1[i], b = x2[i];
        x1[i] = a * c[i] - b * s[i];
        x2[i] = b * c[i] + a * s[i];
      }
    }
  }
}

DRAFTLAB_INLINE void add_body(float* x, int64_t ldx, const float* y, int64_t ldy, int64_t n, int64_t d) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < d; ++i) x[j * ldx + i] += y[j * ldy + i];
}

DRAFTLAB_INLINE void silu_mul_body(const float* g, int64_t ldg, int64_t n, int64_t I, float* out, int64_t ldo) {
  for (int64_t j = 0; j < n; ++j) {
    const float* gate = g + j * ldg;
    const float* up = gate + I;
    float* o = out + j * ldo;
    for (int64_t i = 0; i < I; ++i) {
      // silu(a) = a / (1 + exp(-a)); exp of a non-positive argument keeps exp_nonpositive in range.
      const float a = gate[i];
      const float e = exp_nonpositive(-std::fabs(a));  // exp(-|a|)
      const float sig = a >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
      o[i] = a * sig * up[i];
    }
  }
}

// Per row: the largest value m (a NaN is the largest, as in at::argmax) and, unless sum_out is null,
// sum_i exp(x[i] - m), a -inf entry adding exactly 0: what a softmax over a vocabulary needs. Fixed 16-lane partial sums, as in dot().
DRAFTLAB_INLINE void softmax_stats_body(const float* x, int64_t ldx, int64_t n, int64_t V, float* max_out,
                                        float* sum_out) {
  for (int64_t j = 0; j < n; ++j) {
    const float* r = x + j * ldx;
    float lane[kLanes];
    for (int c = 0; c < kLanes; ++c) lane[c] = -std::numeric_limits<float>::infinity();
    int64_t i = 0;
    // A NaN sticks: once a lane holds one, `x > lane` is false and `x != x` only holds for another NaN.
    for (; i + kLanes <= V; i += kLanes)
      for (int c = 0; c < kLanes; ++c) lane[c] = (r[i + c] > lane[c] || r[i + c] != r[i + c]) ? r[i + c] : lane[c];
    for (int c = 0; i < V; ++i, ++c) lane[c] = (r[i] > lane[c] || r[i] != r[i]) ? r[i] : lane[c];
    float m = lane[0];
    for (int c = 1; c < kLanes; ++c) m = (lane[c] > m || lane[c] != lane[c]) ? lane[c] : m;
    max_out[j] = m;
    if (sum_out == nullptr) continue;
    float sum[kLanes] = {};
    i = 0;
    for (; i + kLanes <= V; i += kLanes)
      for (int c = 0; c < kLanes; ++c) {
        const float t = r[i + c] - m;
        sum[c] += t >= -87.0f ? exp_nonpositive(t) : 0.0f;
      }
    for (int c = 0; i < V; ++i, ++c) {
      const float t = r[i] - m;
      sum[c] += t >= -87.0f ? exp_nonpositive(t) : 0.0f;
    }
    for (int w = kLanes / 2; w > 0; w /= 2)
      for (int c = 0; c < w; ++c) sum[c] += sum[c + w];
    sum_out[j] = sum[0];
  }
}

template <class KV>
DRAFTLAB_INLINE void attention_body(const float* q, int64_t ldq, int64_t n, const KV* k, const KV* v, int64_t T,
                                    const uint8_t* visible, int64_t ldv, const AttentionShape& s, float* out,
                                    int64_t ldo, float* scores) {
  const int64_t hd = s.head_dim, group = s.heads / s.kv_heads;
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* vis = visible ? visible + j * ldv : nullptr;
    const int64_t last = visible ? T : T - n + j + 1;  // causal: rows [0, last)
    for (int64_t h = 0; h < s.heads; ++h) {
      const float* qh = q + j * ldq + h * hd;
      const KV* kh = k + (h / group) * s.kv_head_stride;
      const KV* vh = v + (h / group) * s.kv_head_stride;
      float* o = out + j * ldo + h * hd;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t t = 0; t < last; ++t) {
        if (vis && !vis[t]) continue;
        const float sc = dot(qh, kh + t * hd, hd) * s.scale;
        scores[t] = sc;
        m = std::max(m, sc);
      }
      float sum = 0.0f;
      for (int64_t i = 0; i < hd; ++i) o[i] = 0.0f;
      for (int64_t t = 0; t < last; ++t) {
        if (vis && !vis[t]) continue;
        const float p = exp_nonpositive(scores[t] - m);
        sum += p;
        const KV* vt = vh + t * hd;
        for (int64_t i = 0; i < hd; ++i) o[i] += p * kv_value(vt, i);
      }
      const float inv = 1.0f / sum;  // sum >= 1: the max term contributes exp(0)
      for (int64_t i = 0; i < hd; ++i) o[i] *= inv;
    }
  }
}

// Stores rows into the float16 KV cache, rounding to nearest even (F16C's vcvtps2ph does the same where the
// compiler may use it; float_to_half is the portable spelling).
DRAFTLAB_INLINE void float_to_half_body(const float* x, int64_t count, uint16_t* out) {
#if defined(__x86_64__) && defined(__FLT16_MAX__)
  for (int64_t i = 0; i < count; ++i) {
    const _Float16 h = static_cast<_Float16>(x[i]);
    std::memcpy(out + i, &h, sizeof(h));
  }
#else
  for (int64_t i = 0; i < count; ++i) out[i] = float_to_half(x[i]);
#endif
}

// One function per ISA for each op.
#define DRAFTLAB_OPS_FOR(SUFFIX, ATTR)                                                                             \
  ATTR void rms_norm_##SUFFIX(const float* x, int64_t ldx, int64_t n, int64_t d, const float* w, double eps,       \
                              float* out, int64_t ldo) {                                                          \
    rms_norm_body(x, ldx, n, d, w, eps, out, ldo);                                                                \
  }                                                                                                               \
  ATTR void rope_##SUFFIX(float* x, int64_t ldx, int64_t n, int64_t heads, int64_t hd, const float* const* c,    \
                          const float* const* s) {                                                                \
    rope_body(x, ldx, n, heads, hd, c, s);                                                                        \
  }                                                                                                               \
  ATTR void add_##SUFFIX(float* x, int64_t ldx, const float* y, int64_t ldy, int64_t n, int64_t d) {             \
    add_body(x, ldx, y, ldy, n, d);                                                                               \
  }                                                                                                               \
  ATTR void silu_mul_##SUFFIX(const float* g, int64_t ldg, int64_t n, int64_t I, float* out, int64_t ldo) {      \
    silu_mul_body(g, ldg, n, I, out, ldo);                                                                        \
  }                                                                                                               \
  template <class KV>                                                                                              \
  ATTR void attention_##SUFFIX(const float* q, int64_t ldq, int64_t n, const KV* k, const KV* v, int64_t T,       \
                               const uint8_t* vis, int64_t ldv, const AttentionShape& s, float* out, int64_t ldo, \
                               float* scratch) {                                                                  \
    attention_body(q, ldq, n, k, v, T, vis, ldv, s, out, ldo, scratch);                                           \
  }                                                                                                               \
  ATTR void float_to_half_##SUFFIX(const float* x, int64_t count, uint16_t* out) {                                \
    float_to_half_body(x, count, out);                                                                            \
  }                                                                                                               \
  ATTR void softmax_stats_##SUFFIX(const float* x, int64_t ldx, int64_t n, int64_t V, float* m, float* sum) {     \
    softmax_stats_body(x, ldx, n, V, m, sum);                                                                     \
  }

DRAFTLAB_OPS_FOR(portable, )
#if defined(__x86_64__)
DRAFTLAB_OPS_FOR(avx2, DRAFTLAB_T256)
DRAFTLAB_OPS_FOR(avx512, DRAFTLAB_T512)

// Attention that shares the cache across query rows, for head_dim 16, 32, 64 and 128. The query items that read
// one kv head (rows x the query heads of its group) go in blocks of up to four: each key and value row is loaded
// once per block and used by every item in it, instead of once per item (with 448 cached rows a row-by-row pass
// made 8 rows pay 3.4x what one row pays for the cache). Per (item, key) the instructions are the same whatever
// the block and wherever the key sits in the cache: a score is one W-lane FMA chain over the head's chunks,
// scaled, then summed over lanes in a fixed tree; softmax weights come from a vector exp over whole W-blocks (no
// vector/scalar split); value sums add the visible keys in cache order. So every row is bit-identical to the row
// alone and a tree row to the compacted chain (tests hold both). Written with GCC vector extensions: W = 16 lanes
// (one zmm) for AVX-512, W = 8 (one ymm) for AVX2.
template <int W>
struct Vec;
template <>
struct Vec<8> {
  typedef float F __attribute__((vector_size(32)));
  typedef uint32_t U __attribute__((vector_size(32)));
  typedef uint16_t H __attribute__((vector_size(16)));
};
template <>
struct Vec<16> {
  typedef float F __attribute__((vector_size(64)));
  typedef uint32_t U __attribute__((vector_size(64)));
  typedef uint16_t H __attribute__((vector_size(32)));
};
typedef float v4 __attribute__((vector_size(16)));

template <int W>
DRAFTLAB_INLINE typename Vec<W>::F load_lanes(const float* p) {
  typename Vec<W>::F v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
// W float16 cache values widened exactly, with integer lane operations: exponent and mantissa moved to float
// position, then scaled by 2^112 (exact for normal and subnormal halves), inf and NaN set apart, the sign put
// back. (GCC 12 turns a vector of _Float16 into one pinsrw + vcvtph2ps per element, slower than a float32 cache;
// F16C's intrinsics cannot be called from this ISA-neutral body.)
template <int W>
DRAFTLAB_INLINE typename Vec<W>::F load_lanes(const uint16_t* p) {
  using F = typename Vec<W>::F;
  using U = typename Vec<W>::U;
  typename Vec<W>::H h;
  std::memcpy(&h, p, sizeof(h));
  const U u = __builtin_convertvector(h, U);
  const U magnitude = (u & 0x7fffu) << 13;
  F scaled;
  std::memcpy(&scaled, &magnitude, sizeof(scaled));
  scaled = scaled * 0x1p112f;
  U bits;
  std::memcpy(&bits, &scaled, sizeof(bits));
  bits = magnitude >= (0x7c00u << 13) ? (magnitude | 0x7f800000u) : bits;
  bits |= (u & 0x8000u) << 16;
  F out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// Lanes (c, c + W/2), ..., then (c, c + 2), (c, c + 1).
DRAFTLAB_INLINE float reduce_lanes(Vec<8>::F a) {
  const v4 c = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  return (c[0] + c[2]) + (c[1] + c[3]);
}
DRAFTLAB_INLINE float reduce_lanes(Vec<16>::F a) {
  return reduce_lanes(Vec<8>::F(__builtin_shufflevector(a, a, 0, 1, 2, 3, 4, 5, 6, 7) +
                                __builtin_shufflevector(a, a, 8, 9, 10, 11, 12, 13, 14, 15)));
}

// One block of R query items over one kv head: query, output, visibility row (nullptr = all of [0, last)), rows
// seen, scores scratch.
template <int R>
struct AttentionBlock {
  const float* q[R];
  float* out[R];
  const uint8_t* vis[R];
  int64_t last[R];
  float* scores[R];
};

// One head row of W * CH values (a query, key or value) as CH vectors of W float32 lanes.
template <int W, int CH, class T>
DRAFTLAB_INLINE void load_row(const T* row, typename Vec<W>::F (&out)[CH]) {
  DRAFTLAB_UNROLL
  for (int c = 0; c < CH; ++c) out[c] = load_lanes<W>(row + W * c);
}

template <int W, int R, int CH, class KV>
DRAFTLAB_INLINE void attention_block(const AttentionBlock<R>& b, int64_t tmax, const KV* kh, const KV* vh,
                                     float scale) {
  using F = typename Vec<W>::F;
  constexpr int64_t hd = W * CH;
  // Scores of every key below tmax for every item (keys an item does not see are computed and ignored).
  F qv[R][CH];
  DRAFTLAB_UNROLL
  for (int r = 0; r < R; ++r) load_row<W, CH>(b.q[r], qv[r]);
  for (int64_t t = 0; t < tmax; ++t) {
    F kv[CH];
    load_row<W, CH>(kh + t * hd, kv);
    DRAFTLAB_UNROLL
    for (int r = 0; r < R; ++r) {
      F acc = qv[r][0] * kv[0];
      DRAFTLAB_UNROLL
      for (int c = 1; c < CH; ++c) acc = qv[r][c] * kv[c] + acc;
      b.scores[r][t] = reduce_lanes(acc * scale);
    }
  }
  // Softmax weights per item: max over visible keys, exp over whole W-blocks (padding set to the max).
  DRAFTLAB_UNROLL
  for (int r = 0; r < R; ++r) {
    float* sc = b.scores[r];
    const int64_t last = b.last[r];
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < last; ++t)
      if (!b.vis[r] || b.vis[r][t]) m = std::max(m, sc[t]);
    const int64_t padded = (last + W - 1) / W * W;
    for (int64_t t = last; t < padded; ++t) sc[t] = m;
    for (int64_t t = 0; t < padded; t += W) {
      const F e = exp_nonpositive(load_lanes<W>(sc + t) - m);
      std::memcpy(sc + t, &e, sizeof(e));
    }
  }
  // Weighted values, visible keys in cache order.
  F o[R][CH];
  float sum[R];
  DRAFTLAB_UNROLL
  for (int r = 0; r < R; ++r) {
    sum[r] = 0.0f;
    DRAFTLAB_UNROLL
    for (int c = 0; c < CH; ++c) o[r][c] = F{};
  }
  for (int64_t t = 0; t < tmax; ++t) {
    F vv[CH];
    load_row<W, CH>(vh + t * hd, vv);
    DRAFTLAB_UNROLL
    for (int r = 0; r < R; ++r) {
      if (t >= b.last[r] || (b.vis[r] && !b.vis[r][t])) continue;
      const float p = b.scores[r][t];
      sum[r] += p;
      DRAFTLAB_UNROLL
      for (int c = 0; c < CH; ++c) o[r][c] = p * vv[c] + o[r][c];
    }
  }
  DRAFTLAB_UNROLL
  for (int r = 0; r < R; ++r) {
    const float inv = 1.0f / sum[r];  // >= 1: the max term contributes exp(0)
    DRAFTLAB_UNROLL
    for (int c = 0; c < CH; ++c) {
      const F y = o[r][c] * inv;
      std::memcpy(b.out[r] + W * c, &y, sizeof(y));
    }
  }
}

// Scratch the shared pass needs: kMaxBlock rows of T rounded up to 16.
constexpr int64_t kMaxBlock = 4;
int64_t padded_rows(int64_t T) { return (T + 15) / 16 * 16; }

// The items [i0, i0 + R) of kv head g as one block.
template <int W, int R, int CH, class KV>
DRAFTLAB_INLINE void attention_items(const float* q, int64_t ldq, int64_t n, const KV* k, const KV* v, int64_t T,
                                     const uint8_t* visible, int64_t ldv, const AttentionShape& s, float* out,
                                     int64_t ldo, float* scratch, int64_t g, int64_t i0) {
  const int64_t group = s.heads / s.kv_heads;
  AttentionBlock<R> b;
  int64_t tmax = 0;
  for (int r = 0; r < R; ++r) {
    const int64_t j = (i0 + r) / group, h = g * group + (i0 + r) % group;
    b.q[r] = q + j * ldq + h * s.head_dim;
    b.out[r] = out + j * ldo + h * s.head_dim;
    b.vis[r] = visible ? visible + j * ldv : nullptr;
    b.last[r] = visible ? T : T - n + j + 1;
    b.scores[r] = scratch + r * padded_rows(T);
    tmax = std::max(tmax, b.last[r]);
  }
  attention_block<W, R, CH, KV>(b, tmax, k + g * s.kv_head_stride, v + g * s.kv_head_stride, s.scale);
}

// Blocks of four items while four remain, then two, then one: no block carries items that are not there.
template <int W, int CH, class KV>
DRAFTLAB_INLINE void attention_shared_body(const float* q, int64_t ldq, int64_t n, const KV* k, const KV* v,
                                           int64_t T, const uint8_t* visible, int64_t ldv, const AttentionShape& s,
                                           float* out, int64_t ldo, float* scratch) {
  const int64_t items = n * (s.heads / s.kv_heads);
  for (int64_t g = 0; g < s.kv_heads; ++g) {
    int64_t i0 = 0;
    for (; i0 + 4 <= items; i0 += 4)
      attention_items<W, 4, CH>(q, ldq, n, k, v, T, visible, ldv, s, out, ldo, scratch, g, i0);
    for (; i0 + 2 <= items; i0 += 2)
      attention_items<W, 2, CH>(q, ldq, n, k, v, T, visible, ldv, s, out, ldo, scratch, g, i0);
    for (; i0 < items; ++i0)
      attention_items<W, 1, CH>(q, ldq, n, k, v, T, visible, ldv, s, out, ldo, scratch, g, i0);
  }
}

#define DRAFTLAB_SHARED_ATTENTION_FOR(SUFFIX, ATTR, W)                                                              \
  template <class KV>                                                                                              \
  ATTR bool attention_shared_##SUFFIX(const float* q, int64_t ldq, int64_t n, const KV* k, const KV* v,             \
                                      int64_t T, const uint8_t* vis, int64_t ldv, const AttentionShape& s,          \
                                      float* out, int64_t ldo, float* scratch) {                                    \
    switch (s.head_dim) {                                                                                          \
      case 16: attention_shared_body<W, 16 / W>(q, ldq, n, k, v, T, vis, ldv, s, out, ldo, scratch); return true;   \
      case 32: attention_shared_body<W, 32 / W>(q, ldq, n, k, v, T, vis, ldv, s, out, ldo, scratch); return true;   \
      case 64: attention_shared_body<W, 64 / W>(q, ldq, n, k, v, T, vis, ldv, s, out, ldo, scratch); return true;   \
      case 128: attention_shared_body<W, 128 / W>(q, ldq, n, k, v, T, vis, ldv, s, out, ldo, scratch); return true; \
      default: return false;                                                                                       \
    }                                                                                                              \
  }
DRAFTLAB_SHARED_ATTENTION_FOR(avx512, DRAFTLAB_T512, 16)
DRAFTLAB_SHARED_ATTENTION_FOR(avx2, DRAFTLAB_T256, 8)

#define DRAFTLAB_DISPATCH(OP, ...)                                      \
  switch (best_kernel_isa()) {                                         \
    case KernelIsa::Avx512: return OP##_avx512(__VA_ARGS__);           \
    case KernelIsa::Avx2: return OP##_avx2(__VA_ARGS__);               \
    default: return OP##_portable(__VA_ARGS__);                        \
  }
#else
#define DRAFTLAB_DISPATCH(OP, ...) return OP##_portable(__VA_ARGS__);
#endif

}  // namespace

void rms_norm_rows(const float* x, int64_t ldx, int64_t n, int64_t d, const float* weight, double eps, float* out,
                   int64_t ldo) {
  DRAFTLAB_DISPATCH(rms_norm, x, ldx, n, d, weight, eps, out, ldo)
}

void rope_rows(float* x, int64_t ldx, int64_t n, int64_t heads, int64_t head_dim, const float* const* cos,
               const float* const* sin) {
  DRAFTLAB_DISPATCH(rope, x, ldx, n, heads, head_dim, cos, sin)
}

void add_rows(float* x, int64_t ldx, const float* y, int64_t ldy, int64_t n, int64_t d) {
  DRAFTLAB_DISPATCH(add, x, ldx, y, ldy, n, d)
}

void silu_mul_rows(const float* gate_up, int64_t ldg, int64_t n, int64_t I, float* out, int64_t ldo) {
  DRAFTLAB_DISPATCH(silu_mul, gate_up, ldg, n, I, out, ldo)
}

int64_t attention_scratch_floats(int64_t T) { return kMaxBlock * padded_rows(T); }

void attention_rows(const float* q, int64_t ldq, int64_t n, const void* k, const void* v, int64_t T,
                    const uint8_t* visible, int64_t ldv, const AttentionShape& shape, float* out, int64_t ldo,
                    float* scratch) {
  attention_rows(q, ldq, n, k, v, T, visible, ldv, shape, out, ldo, scratch, best_kernel_isa());
}

namespace {
template <class KV>
void attention_on(const float* q, int64_t ldq, int64_t n, const KV* k, const KV* v, int64_t T,
                  const uint8_t* visible, int64_t ldv, const AttentionShape& shape, float* out, int64_t ldo,
                  float* scratch, KernelIsa isa) {
#if defined(__x86_64__)
  if (isa == KernelIsa::Avx512) {
    if (attention_shared_avx512(q, ldq, n, k, v, T, visible, ldv, shape, out, ldo, scratch)) return;
    return attention_avx512(q, ldq, n, k, v, T, visible, ldv, shape, out, ldo, scratch);
  }
  if (isa == KernelIsa::Avx2) {
    if (attention_shared_avx2(q, ldq, n, k, v, T, visible, ldv, shape, out, ldo, scratch)) return;
    return attention_avx2(q, ldq, n, k, v, T, visible, ldv, shape, out, ldo, scratch);
  }
#endif
  (void)isa;
  attention_portable(q, ldq, n, k, v, T, visible, ldv, shape, out, ldo, scratch);
}
}  // namespace

void attention_rows(const float* q, int64_t ldq, int64_t n, const void* k, const void* v, int64_t T,
                    const uint8_t* visible, int64_t ldv, const AttentionShape& shape, float* out, int64_t ldo,
                    float* scratch, KernelIsa isa) {
  if (static_cast<int>(isa) > static_cast<int>(best_kernel_isa()))
    throw std::invalid_argument(std::string("attention_rows: this CPU cannot run the ") + kernel_isa_name(isa) +
                                " kernel");
  if (shape.kv_float16)
    attention_on(q, ldq, n, static_cast<const uint16_t*>(k), static_cast<const uint16_t*>(v), T, visible, ldv, shape,
                 out, ldo, scratch, isa);
  else
    attention_on(q, ldq, n, static_cast<const float*>(k), static_cast<const float*>(v), T, visible, ldv, shape, out,
                 ldo, scratch, isa);
}

void float_to_half_rows(const float* x, int64_t count, uint16_t* out) {
  DRAFTLAB_DISPATCH(float_to_half, x, count, out)
}

void softmax_stats_rows(const float* x, int64_t ldx, int64_t n, int64_t V, float* max_out, float* sum_out) {
  DRAFTLAB_DISPATCH(softmax_stats, x, ldx, n, V, max_out, sum_out)
}

}  // namespace draftlab
