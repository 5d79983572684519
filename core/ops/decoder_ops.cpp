// Decoder-layer pieces over raw rows. Each body is written once as plain loops (fixed 16-lane partial sums where
// a row reduces, so the compiler vectorises them without reassociating anything) and compiled three times: for
// AVX-512, AVX2 + FMA and baseline x86-64, picked at run time. Within one process every row always runs the same
// instructions, which is what row independence needs (see decoder_ops.h).
#include "core/ops/decoder_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

// GCC 12 warns inside its own AVX-512 intrinsics (an intentionally undefined pass-through operand).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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
// degree-6 polynomial on [-0.5, 0.5]; relative error ~2e-7 (1-2 ulp). Element-wise, so it vectorises.
DRAFTLAB_INLINE float exp_nonpositive(float x) {
  x = std::max(x, -87.0f);
  const float t = x * 1.44269504088896341f;
  const float fi = std::nearbyint(t);
  const float f = t - fi;  // [-0.5, 0.5]
  float p = 1.535336188319500e-4f;
  p = p * f + 1.339887440266574e-3f;
  p = p * f + 9.618437357674640e-3f;
  p = p * f + 5.550332471162809e-2f;
  p = p * f + 2.402264791363012e-1f;
  p = p * f + 6.931472028550421e-1f;
  p = p * f + 1.0f;
  const int32_t bits = (static_cast<int32_t>(fi) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

// sum_i a[i] * b[i] with 16 lane partial sums reduced in a fixed order.
DRAFTLAB_INLINE float dot(const float* a, const float* b, int64_t len) {
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= len; i += kLanes)
    for (int c = 0; c < kLanes; ++c) lane[c] += a[i + c] * b[i + c];
  for (int c = 0; i < len; ++i, ++c) lane[c] += a[i] * b[i];
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

DRAFTLAB_INLINE void attention_body(const float* q, int64_t ldq, int64_t n, const float* k, const float* v, int64_t T,
                                    const uint8_t* visible, int64_t ldv, const AttentionShape& s, float* out,
                                    int64_t ldo, float* scores) {
  const int64_t hd = s.head_dim, group = s.heads / s.kv_heads;
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* vis = visible ? visible + j * ldv : nullptr;
    const int64_t last = visible ? T : T - n + j + 1;  // causal: rows [0, last)
    for (int64_t h = 0; h < s.heads; ++h) {
      const float* qh = q + j * ldq + h * hd;
      const float* kh = k + (h / group) * s.kv_head_stride;
      const float* vh = v + (h / group) * s.kv_head_stride;
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
        const float* vt = vh + t * hd;
        for (int64_t i = 0; i < hd; ++i) o[i] += p * vt[i];
      }
      const float inv = 1.0f / sum;  // sum >= 1: the max term contributes exp(0)
      for (int64_t i = 0; i < hd; ++i) o[i] *= inv;
    }
  }
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
  ATTR void attention_##SUFFIX(const float* q, int64_t ldq, int64_t n, const float* k, const float* v, int64_t T, \
                               const uint8_t* vis, int64_t ldv, const AttentionShape& s, float* out, int64_t ldo, \
                               float* scratch) {                                                                  \
    attention_body(q, ldq, n, k, v, T, vis, ldv, s, out, ldo, scratch);                                           \
  }

DRAFTLAB_OPS_FOR(portable, )
#if defined(__x86_64__)
DRAFTLAB_OPS_FOR(avx2, DRAFTLAB_T256)
DRAFTLAB_OPS_FOR(avx512, DRAFTLAB_T512)
#include <immintrin.h>

// Attention with head_dim a multiple of 16 (64, 128, ...), written out for AVX-512: per key one FMA chain over
// the head's 16-lane chunks and a fixed reduction, softmax weights from a vectorised exp over the scores, then
// the value rows accumulated key by key in cache order. Each visible key's score, weight and contribution is
// computed by the same instructions wherever it sits, and the sums run over visible keys in cache order, so the
// row-independence contract holds exactly as in the generic body (tests compare both with a naive reference and
// a tree row with its compacted chain).
DRAFTLAB_T512 inline __m512 exp_nonpositive16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 fi = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, fi);
  __m512 p = _mm512_set1_ps(1.535336188319500e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fi), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

// q · k over `chunks` 16-lane chunks: one FMA chain, lanes not yet reduced.
DRAFTLAB_T512 inline __m512 key_dot16(const __m512* qv, const float* kt, int64_t chunks) {
  __m512 acc = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kt));
  for (int64_t c = 1; c < chunks; ++c) acc = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kt + 16 * c), acc);
  return acc;
}

DRAFTLAB_T512 void attention_avx512_hd16(const float* q, int64_t ldq, int64_t n, const float* k, const float* v,
                                          int64_t T, const uint8_t* visible, int64_t ldv, const AttentionShape& s,
                                          float* out, int64_t ldo, float* scores) {
  const int64_t hd = s.head_dim, chunks = hd / 16, group = s.heads / s.kv_heads;
  const __m512 scale = _mm512_set1_ps(s.scale);
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* vis = visible ? visible + j * ldv : nullptr;
    const int64_t last = visible ? T : T - n + j + 1;
    for (int64_t h = 0; h < s.heads; ++h) {
      const float* qh = q + j * ldq + h * hd;
      const float* kh = k + (h / group) * s.kv_head_stride;
      const float* vh = v + (h / group) * s.kv_head_stride;
      __m512 qv[16];
      for (int64_t c = 0; c < chunks; ++c) qv[c] = _mm512_loadu_ps(qh + 16 * c);
      // Scores of every row up to `last`, four keys at a time for independent chains (each key's score is the
      // same instruction sequence wherever it sits); the max over the visible ones.
      int64_t t = 0;
      for (; t + 4 <= last; t += 4) {
        const __m512 a0 = key_dot16(qv, kh + t * hd, chunks), a1 = key_dot16(qv, kh + (t + 1) * hd, chunks);
        const __m512 a2 = key_dot16(qv, kh + (t + 2) * hd, chunks), a3 = key_dot16(qv, kh + (t + 3) * hd, chunks);
        scores[t] = _mm512_reduce_add_ps(_mm512_mul_ps(a0, scale));
        scores[t + 1] = _mm512_reduce_add_ps(_mm512_mul_ps(a1, scale));
        scores[t + 2] = _mm512_reduce_add_ps(_mm512_mul_ps(a2, scale));
        scores[t + 3] = _mm512_reduce_add_ps(_mm512_mul_ps(a3, scale));
      }
      for (; t < last; ++t) scores[t] = _mm512_reduce_add_ps(_mm512_mul_ps(key_dot16(qv, kh + t * hd, chunks), scale));
      float m = -std::numeric_limits<float>::infinity();
      for (t = 0; t < last; ++t)
        if (!vis || vis[t]) m = std::max(m, scores[t]);
      // Weights for every row up to `last` (invisible ones are skipped below, whatever they hold).
      const __m512 mv = _mm512_set1_ps(m);
      for (t = 0; t < last; t += 16) {
        const __mmask16 mask = last - t >= 16 ? static_cast<__mmask16>(0xffff)
                                              : static_cast<__mmask16>((1u << (last - t)) - 1u);
        const __m512 sv = _mm512_maskz_loadu_ps(mask, scores + t);
        _mm512_mask_storeu_ps(scores + t, mask, exp_nonpositive16(_mm512_sub_ps(sv, mv)));
      }
      __m512 o[16];
      for (int64_t c = 0; c < chunks; ++c) o[c] = _mm512_setzero_ps();
      float sum = 0.0f;
      for (t = 0; t < last; ++t) {
        if (vis && !vis[t]) continue;
        const float p = scores[t];
        sum += p;
        const __m512 pv = _mm512_set1_ps(p);
        const float* vt = vh + t * hd;
        for (int64_t c = 0; c < chunks; ++c) o[c] = _mm512_fmadd_ps(pv, _mm512_loadu_ps(vt + 16 * c), o[c]);
      }
      const __m512 inv = _mm512_set1_ps(1.0f / sum);
      float* oh = out + j * ldo + h * hd;
      for (int64_t c = 0; c < chunks; ++c) _mm512_storeu_ps(oh + 16 * c, _mm512_mul_ps(o[c], inv));
    }
  }
}

void attention_avx512_best(const float* q, int64_t ldq, int64_t n, const float* k, const float* v, int64_t T,
                           const uint8_t* vis, int64_t ldv, const AttentionShape& s, float* out, int64_t ldo,
                           float* scratch) {
  if (s.head_dim % 16 == 0 && s.head_dim <= 256)
    return attention_avx512_hd16(q, ldq, n, k, v, T, vis, ldv, s, out, ldo, scratch);
  attention_avx512(q, ldq, n, k, v, T, vis, ldv, s, out, ldo, scratch);
}

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

void attention_rows(const float* q, int64_t ldq, int64_t n, const float* k, const float* v, int64_t T,
                    const uint8_t* visible, int64_t ldv, const AttentionShape& shape, float* out, int64_t ldo,
                    float* scratch) {
  attention_rows(q, ldq, n, k, v, T, visible, ldv, shape, out, ldo, scratch, best_kernel_isa());
}

void attention_rows(const float* q, int64_t ldq, int64_t n, const float* k, const float* v, int64_t T,
                    const uint8_t* visible, int64_t ldv, const AttentionShape& shape, float* out, int64_t ldo,
                    float* scratch, KernelIsa isa) {
  if (static_cast<int>(isa) > static_cast<int>(best_kernel_isa()))
    throw std::invalid_argument(std::string("attention_rows: this CPU cannot run the ") + kernel_isa_name(isa) +
                                " kernel");
#if defined(__x86_64__)
  if (isa == KernelIsa::Avx512)
    return attention_avx512_best(q, ldq, n, k, v, T, visible, ldv, shape, out, ldo, scratch);
  if (isa == KernelIsa::Avx2) return attention_avx2(q, ldq, n, k, v, T, visible, ldv, shape, out, ldo, scratch);
#endif
  attention_portable(q, ldq, n, k, v, T, visible, ldv, shape, out, ldo, scratch);
}

}  // namespace draftlab
