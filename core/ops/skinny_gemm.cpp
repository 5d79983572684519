// Skinny GEMM kernel: y[n, out] = x[n, k] · w[k, out] for small n, w streamed from memory once per call.
//
// Blocking scheme (AVX2+FMA path):
//   * The output range is cut into panels of NR columns (16..64 floats = 1..4 cache lines per weight row).
//     A panel's weights, k x NR floats (288 x 16 x 4 B = 18 KB), are read from memory by the first row chunk and
//     stay in L1/L2 while the remaining row chunks reuse them, so DRAM traffic is one pass over w for any n.
//   * The rows of x are cut into chunks of MR <= 6 rows, sized evenly (n = 8 -> 4 + 4, not 6 + 2).
//   * Micro-kernel: MR x NR accumulators held in ymm registers across the whole k loop. Per weight row i it loads
//     the NR weights once, broadcasts x[r, i] per row and issues MR * NR / 8 FMAs. No packing: the weight rows are
//     read in place (stride ldw) and the k loop software-prefetches the same rows of a panel a few panels ahead,
//     because the hardware prefetchers cannot follow hundreds of page-crossing strided streams.
//   * Panel width depends on n: few rows need wide panels to keep >= 8 independent FMA chains busy (FMA latency 4
//     cycles, 2 FMA units), n >= 4 uses the classic 6 x 16 shape (12 accumulators + 2 weight + 1 broadcast reg).
//   * Very long k is cut into blocks of KC rows (y accumulated across blocks) so a panel stays in L1/L2.
//   * Tails: columns left over after the last full panel are done 8 at a time with the 1-vector kernel, the last
//     < 8 with masked loads/stores; any n, k, o range and leading dimensions work.
// For n = 1..3 the kernel is memory bound; from n ~ 4-5 on it becomes FMA bound (n rows cost n FMAs per weight),
// so the time grows again, but much more slowly than OpenBLAS, which packs all of w for every call.
//
// The portable path uses the same panel / row-chunk loop in plain C++ (the compiler vectorises the inner loop).
#include "core/ops/skinny_gemm.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace draftlab {
namespace {

constexpr int64_t kMaxMR = 6;

// Splits n rows into chunks of at most max_mr rows, as even as possible. Returns the chunk count; sizes in mr[].
int split_rows(int64_t n, int64_t max_mr, int64_t* mr, int max_chunks) {
  const int64_t chunks = (n + max_mr - 1) / max_mr;
  if (chunks > max_chunks) return -1;
  for (int64_t c = 0; c < chunks; ++c) mr[c] = n / chunks + (c < n % chunks ? 1 : 0);
  return static_cast<int>(chunks);
}

void zero_output(float* y, int64_t ldy, int64_t n, int64_t o_begin, int64_t o_end) {
  for (int64_t j = 0; j < n; ++j) std::fill(y + j * ldy + o_begin, y + j * ldy + o_end, 0.0f);
}

// ---- portable path ------------------------------------------------------------------------------------------------

constexpr int64_t kPortableNR = 16;
constexpr int64_t kPortableMR = 4;

// Full MR x 16 tile: fixed trip counts so the compiler vectorises the inner loop and keeps acc in registers.
template <int MR>
void portable_tile(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy, int64_t k,
                   bool accumulate) {
  float acc[MR][kPortableNR];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < kPortableNR; ++c) acc[r][c] = accumulate ? y[r * ldy + c] : 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    const float* wr = w + i * ldw;
    for (int r = 0; r < MR; ++r) {
      const float xv = x[r * ldx + i];
      for (int c = 0; c < kPortableNR; ++c) acc[r][c] += xv * wr[c];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < kPortableNR; ++c) y[r * ldy + c] = acc[r][c];
}

// Any tile up to kPortableMR x kPortableNR.
void portable_tile_any(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy, int64_t k,
                       int64_t mr, int64_t nc) {
  float acc[kPortableMR][kPortableNR] = {};
  for (int64_t i = 0; i < k; ++i) {
    const float* wr = w + i * ldw;
    for (int64_t r = 0; r < mr; ++r) {
      const float xv = x[r * ldx + i];
      for (int64_t c = 0; c < nc; ++c) acc[r][c] += xv * wr[c];
    }
  }
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t c = 0; c < nc; ++c) y[r * ldy + c] = acc[r][c];
}

constexpr int64_t kPortableKC = 512;

void portable_gemm(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy, int64_t n,
                   int64_t k, int64_t o_begin, int64_t o_end) {
  for (int64_t o = o_begin; o < o_end; o += kPortableNR) {
    const int64_t nc = std::min(kPortableNR, o_end - o);
    for (int64_t kb = 0; kb < k; kb += kPortableKC) {
      const int64_t kc = std::min(kPortableKC, k - kb);
      const bool accumulate = kb > 0;
      for (int64_t r0 = 0; r0 < n; r0 += kPortableMR) {
        const int64_t mr = std::min(kPortableMR, n - r0);
        const float* xs = x + r0 * ldx + kb;
        const float* ws = w + kb * ldw + o;
        float* ys = y + r0 * ldy + o;
        if (nc == kPortableNR && !accumulate && mr == kPortableMR) {
          portable_tile<kPortableMR>(xs, ldx, ws, ldw, ys, ldy, kc, false);
        } else if (nc == kPortableNR && mr == kPortableMR) {
          portable_tile<kPortableMR>(xs, ldx, ws, ldw, ys, ldy, kc, true);
        } else if (nc == kPortableNR && mr == 1) {
          portable_tile<1>(xs, ldx, ws, ldw, ys, ldy, kc, accumulate);
        } else if (!accumulate) {
          portable_tile_any(xs, ldx, ws, ldw, ys, ldy, kc, mr, nc);
        } else {
          // Rare (k > KC and a partial tile): compute the block into a scratch tile, then add.
          float tmp[kPortableMR * kPortableNR];
          portable_tile_any(xs, ldx, ws, ldw, tmp, kPortableNR, kc, mr, nc);
          for (int64_t r = 0; r < mr; ++r)
            for (int64_t c = 0; c < nc; ++c) ys[r * ldy + c] += tmp[r * kPortableNR + c];
        }
      }
    }
  }
}

// ---- AVX2 + FMA path ----------------------------------------------------------------------------------------------

#if defined(__x86_64__)
#define DRAFTLAB_AVX2 __attribute__((target("avx2,fma")))

// How one call is blocked; chosen from n by avx2_config().
struct Avx2Config {
  int nv;            // ymm vectors per panel row: NR = 8 * nv columns
  int64_t max_mr;    // rows per chunk (<= kMaxMR)
  int64_t kc;        // k block
  int64_t pf_panels; // prefetch distance in panels (0: no software prefetch)
};

Avx2Config avx2_config(int64_t n) {
  if (n == 1) return {8, 1, 1024, 2};
  if (n == 2) return {4, 2, 1024, 2};
  if (n == 3) return {4, 3, 1024, 2};
  return {2, kMaxMR, 512, 4};
}

// MR rows x NV vectors micro-kernel over kc weight rows. Masked: the last vector uses mask (tail < 8 columns).
// pf_off: prefetch w + i * ldw + pf_off (in floats) for every row i, one prefetch per cache line of the panel row.
template <int MR, int NV, bool kMasked, bool kPrefetch>
DRAFTLAB_AVX2 void avx2_tile(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
                             int64_t kc, bool accumulate, __m256i mask, int64_t pf_off) {
  __m256 acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      if (!accumulate) {
        acc[r][v] = _mm256_setzero_ps();
      } else if (kMasked && v == NV - 1) {
        acc[r][v] = _mm256_maskload_ps(y + r * ldy + 8 * v, mask);
      } else {
        acc[r][v] = _mm256_loadu_ps(y + r * ldy + 8 * v);
      }
    }
  }
  const float* wr = w;
  for (int64_t i = 0; i < kc; ++i, wr += ldw) {
    if (kPrefetch) {
      for (int l = 0; l < (NV + 1) / 2; ++l) _mm_prefetch(reinterpret_cast<const char*>(wr + pf_off + 16 * l), _MM_HINT_T0);
    }
    __m256 wv[NV];
    for (int v = 0; v < NV; ++v) {
      wv[v] = (kMasked && v == NV - 1) ? _mm256_maskload_ps(wr + 8 * v, mask) : _mm256_loadu_ps(wr + 8 * v);
    }
    for (int r = 0; r < MR; ++r) {
      const __m256 xb = _mm256_broadcast_ss(x + r * ldx + i);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(xb, wv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      if (kMasked && v == NV - 1) {
        _mm256_maskstore_ps(y + r * ldy + 8 * v, mask, acc[r][v]);
      } else {
        _mm256_storeu_ps(y + r * ldy + 8 * v, acc[r][v]);
      }
    }
  }
}

// Runtime mr (1..kMaxMR) -> template.
template <int NV, bool kMasked, bool kPrefetch>
DRAFTLAB_AVX2 void avx2_tile_mr(int64_t mr, const float* x, int64_t ldx, const float* w, int64_t ldw, float* y,
                                int64_t ldy, int64_t kc, bool accumulate, __m256i mask, int64_t pf_off) {
  switch (mr) {
    case 1: avx2_tile<1, NV, kMasked, kPrefetch>(x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf_off); break;
    case 2: avx2_tile<2, NV, kMasked, kPrefetch>(x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf_off); break;
    case 3: avx2_tile<3, NV, kMasked, kPrefetch>(x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf_off); break;
    case 4: avx2_tile<4, NV, kMasked, kPrefetch>(x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf_off); break;
    case 5: avx2_tile<5, NV, kMasked, kPrefetch>(x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf_off); break;
    default: avx2_tile<6, NV, kMasked, kPrefetch>(x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf_off); break;
  }
}

// Full panels of NV vectors over [o_begin, o_begin + panels * 8 * NV).
template <int NV>
DRAFTLAB_AVX2 void avx2_panels(const Avx2Config& cfg, const int64_t* mr, int chunks, const float* x, int64_t ldx,
                               const float* w, int64_t ldw, float* y, int64_t ldy, int64_t k, int64_t o_begin,
                               int64_t panels) {
  constexpr int64_t NR = 8 * NV;
  const __m256i no_mask = _mm256_set1_epi32(-1);
  const int64_t pf_off = cfg.pf_panels * NR;
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t o = o_begin + p * NR;
    const bool prefetch = cfg.pf_panels > 0 && p + cfg.pf_panels < panels;
    for (int64_t kb = 0; kb < k; kb += cfg.kc) {
      const int64_t kc = std::min(cfg.kc, k - kb);
      int64_t r0 = 0;
      for (int c = 0; c < chunks; ++c) {
        const float* xs = x + r0 * ldx + kb;
        const float* ws = w + kb * ldw + o;
        float* ys = y + r0 * ldy + o;
        // Only the first chunk prefetches: later chunks re-read the same, now cached, panel.
        if (prefetch && c == 0) {
          avx2_tile_mr<NV, false, true>(mr[c], xs, ldx, ws, ldw, ys, ldy, kc, kb > 0, no_mask, pf_off);
        } else {
          avx2_tile_mr<NV, false, false>(mr[c], xs, ldx, ws, ldw, ys, ldy, kc, kb > 0, no_mask, 0);
        }
        r0 += mr[c];
      }
    }
  }
}

DRAFTLAB_AVX2 void avx2_gemm(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
                             int64_t n, int64_t k, int64_t o_begin, int64_t o_end) {
  const Avx2Config cfg = avx2_config(n);
  int64_t mr[16];
  const int chunks = split_rows(n, cfg.max_mr, mr, 16);
  if (chunks < 0) {  // n > 96: not a skinny problem, but stay correct: do it in slices of rows.
    const int64_t step = 16 * cfg.max_mr;
    for (int64_t j = 0; j < n; j += step) {
      avx2_gemm(x + j * ldx, ldx, w, ldw, y + j * ldy, ldy, std::min(step, n - j), k, o_begin, o_end);
    }
    return;
  }
  const int64_t nr = 8 * cfg.nv;
  const int64_t panels = (o_end - o_begin) / nr;
  switch (cfg.nv) {
    case 8: avx2_panels<8>(cfg, mr, chunks, x, ldx, w, ldw, y, ldy, k, o_begin, panels); break;
    case 4: avx2_panels<4>(cfg, mr, chunks, x, ldx, w, ldw, y, ldy, k, o_begin, panels); break;
    default: avx2_panels<2>(cfg, mr, chunks, x, ldx, w, ldw, y, ldy, k, o_begin, panels); break;
  }
  // Tail columns: 8 at a time, the last < 8 masked.
  for (int64_t o = o_begin + panels * nr; o < o_end; o += 8) {
    const int64_t nc = std::min<int64_t>(8, o_end - o);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(nc)), lane);
    for (int64_t kb = 0; kb < k; kb += cfg.kc) {
      const int64_t kc = std::min(cfg.kc, k - kb);
      int64_t r0 = 0;
      for (int c = 0; c < chunks; ++c) {
        const float* xs = x + r0 * ldx + kb;
        const float* ws = w + kb * ldw + o;
        float* ys = y + r0 * ldy + o;
        if (nc == 8) {
          avx2_tile_mr<1, false, false>(mr[c], xs, ldx, ws, ldw, ys, ldy, kc, kb > 0, mask, 0);
        } else {
          avx2_tile_mr<1, true, false>(mr[c], xs, ldx, ws, ldw, ys, ldy, kc, kb > 0, mask, 0);
        }
        r0 += mr[c];
      }
    }
  }
}

bool cpu_has_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
bool cpu_has_avx2_fma() { return false; }
#endif  // __x86_64__

using GemmFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, int64_t, int64_t,
                        int64_t);

struct Dispatch {
  GemmFn fn;
  const char* isa;
  int64_t max_rows;
};

const Dispatch& dispatch() {
  static const Dispatch d = [] {
#if defined(__x86_64__)
    if (cpu_has_avx2_fma()) return Dispatch{avx2_gemm, "avx2+fma", 16};
#endif
    return Dispatch{portable_gemm, "portable", 4};
  }();
  return d;
}

}  // namespace

void skinny_gemm_f32(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy, int64_t n,
                     int64_t k, int64_t o_begin, int64_t o_end) {
  if (n <= 0 || o_end <= o_begin) return;
  if (k <= 0) return zero_output(y, ldy, n, o_begin, o_end);
  dispatch().fn(x, ldx, w, ldw, y, ldy, n, k, o_begin, o_end);
}

void skinny_gemm_f32_portable(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
                              int64_t n, int64_t k, int64_t o_begin, int64_t o_end) {
  if (n <= 0 || o_end <= o_begin) return;
  if (k <= 0) return zero_output(y, ldy, n, o_begin, o_end);
  portable_gemm(x, ldx, w, ldw, y, ldy, n, k, o_begin, o_end);
}

int64_t skinny_gemm_max_rows() { return dispatch().max_rows; }

const char* skinny_gemm_isa() { return dispatch().isa; }

bool skinny_gemm_has_avx2() { return cpu_has_avx2_fma(); }

}  // namespace draftlab
