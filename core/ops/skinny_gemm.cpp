// Skinny GEMM kernel: y[n, out] = x[n, k] · w[k, out] for small n, w streamed from memory once per call.
//
// Why not BLAS: for n = 2..16 OpenBLAS packs all of w before computing, which costs 3-4x a GEMV. Here w is read in
// place, exactly once, and each weight loaded into a register is used for all n rows before it is dropped.
//
// Blocking scheme (AVX2 + FMA path):
//   * Micro-kernel: MR (<= 6) rows of x by NR = 8 * NV columns; the MR x NV ymm accumulators stay in registers
//     over a block of kc weight rows. Per weight row it loads NV vectors, broadcasts x[r, i] per row and issues
//     MR * NV FMAs. n rows are cut into balanced chunks (n = 8 -> 4 + 4, not 6 + 2). When there are several chunks
//     the first one copies the kc x NR panel it reads into a small stack buffer, and the others read that copy (L1,
//     aligned, and immune to cache-set aliasing when ldw is a multiple of 4 KB).
//   * Loop order: output blocks of NB columns -> k blocks of kc rows -> panels of NR columns -> row chunks. Within
//     a k block the panels sweep kc weight rows left to right, so only kc rows (8..64) are streamed at a time, each
//     as one contiguous run: the hardware prefetchers keep up, which they cannot when a whole k x NR panel (288+
//     rows, each in another page) is walked at a time. Software prefetch a few panels ahead in the same rows
//     helps when w comes from DRAM (settings per n in avx2_config()).
//   * The n x NB block of y is accumulated across k blocks in a per-thread scratch (L1/L2), placed so that its
//     stores never 4K-alias the weight loads that follow (that stall cost 2x for power-of-two ldw), and copied out
//     once per output block.
//   * Settings depend on n: n <= 4 is memory bound (short k blocks, wide panels for >= 8 independent FMA chains);
//     from n ~ 5 on the FMAs dominate (6 x 16 tiles, longer k blocks, less y traffic per FMA).
//   * Tails: columns after the last full panel are done 8 at a time with the 1-vector kernel, the last < 8 with
//     masked loads/stores; any n, k, o range and leading dimensions work.
//
// The portable path runs the same loop structure with 128-bit vectors (GCC/Clang vector extension: SSE2 / NEON).
//
// skinny_gemm_max_rows(): 16 on the AVX2 path - measured against OpenBLAS 0.3.21 (Zen kernels, one thread) on the
// shapes of bench/skinny_gemm_bench.cpp, skinny is 1.05-1.6x faster at n = 16 and about even from n ~ 20-32 on,
// where BLAS's packing is amortised and both are FMA bound. 2 on the portable path (no FMA, 4-wide: compute bound
// from n = 3, and slower than BLAS from n = 4).
#include "core/ops/skinny_gemm.h"
#include "core/base/cpu_features.h"
#include "core/ops/unroll.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace draftlab {
namespace {

void zero_output(float* y, int64_t ldy, int64_t n, int64_t o_begin, int64_t o_end) {
  for (int64_t j = 0; j < n; ++j) std::fill(y + j * ldy + o_begin, y + j * ldy + o_end, 0.0f);
}


// Per-thread scratch, grown on demand (never shrinks).
float* thread_scratch(int64_t floats) {
  struct Buffer {
    float* data = nullptr;
    int64_t size = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buf;
  if (buf.size < floats) {
    std::free(buf.data);
    buf.data = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>((floats * 4 + 63) / 64 * 64)));
    buf.size = buf.data != nullptr ? floats : 0;
    if (buf.data == nullptr) throw std::bad_alloc();
  }
  return buf.data;
}

// Returns the first float at or after base whose address is 2048 bytes away from ref modulo 4096. Stores there
// never look like (4K-aliased) earlier writes to the weight rows being loaded next, which stalls loads.
float* away_from(float* base, const float* ref) {
  const uintptr_t want = (reinterpret_cast<uintptr_t>(ref) + 2048) & 4095;
  const uintptr_t delta = (want - (reinterpret_cast<uintptr_t>(base) & 4095)) & 4095;
  return base + delta / sizeof(float);
}

// Output block width NB for n rows: the n x NB block of y (budget bytes) stays in cache across k blocks. A multiple
// of 1024 floats when the budget allows (then one away_from() placement suits every block), a multiple of nr
// otherwise, never more than the (nr-aligned) range.
int64_t output_block(int64_t n, int64_t budget, int64_t nr, int64_t range) {
  int64_t nb = budget / (4 * n);
  nb = nb >= 1024 ? nb / 1024 * 1024 : std::max(nr, nb / nr * nr);
  return std::min(nb, std::max(nr, range));
}

// ---- portable path ------------------------------------------------------------------------------------------------
// Same loop structure as the AVX2 path with 128-bit vectors (SSE2 on any x86-64, NEON on aarch64) through the
// GCC/Clang vector extension; plain scalar code elsewhere. Tiles of MR <= 3 rows x 16 columns.

constexpr int64_t kPortableNR = 16;
constexpr int64_t kPortableMaxMR = 3;

#if defined(__GNUC__)
typedef float Vec4 __attribute__((vector_size(16)));

inline Vec4 load4(const float* p) {
  Vec4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store4(float* p, Vec4 v) { std::memcpy(p, &v, sizeof(v)); }

template <int MR>
void portable_tile(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy, int64_t kc,
                   bool accumulate) {
  Vec4 acc[MR][4];
  DRAFTLAB_UNROLL
  for (int r = 0; r < MR; ++r) {
    DRAFTLAB_UNROLL
    for (int v = 0; v < 4; ++v) acc[r][v] = Vec4{0.0f, 0.0f, 0.0f, 0.0f};
  }
  for (int64_t i = 0; i < kc; ++i) {
    const float* wr = w + i * ldw;
    Vec4 wv[4];
    DRAFTLAB_UNROLL
    for (int v = 0; v < 4; ++v) wv[v] = load4(wr + 4 * v);
    DRAFTLAB_UNROLL
    for (int r = 0; r < MR; ++r) {
      const float xv = x[r * ldx + i];
      const Vec4 xb = {xv, xv, xv, xv};
      DRAFTLAB_UNROLL
      for (int v = 0; v < 4; ++v) acc[r][v] += xb * wv[v];
    }
  }
  DRAFTLAB_UNROLL
  for (int r = 0; r < MR; ++r) {
    DRAFTLAB_UNROLL
    for (int v = 0; v < 4; ++v) {
      float* yp = y + r * ldy + 4 * v;
      store4(yp, accumulate ? acc[r][v] + load4(yp) : acc[r][v]);
    }
  }
}
#else
template <int MR>
void portable_tile(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy, int64_t kc,
                   bool accumulate) {
  float acc[MR][kPortableNR] = {};
  for (int64_t i = 0; i < kc; ++i) {
    const float* wr = w + i * ldw;
    for (int r = 0; r < MR; ++r) {
      const float xv = x[r * ldx + i];
      for (int c = 0; c < kPortableNR; ++c) acc[r][c] += xv * wr[c];
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < kPortableNR; ++c) y[r * ldy + c] = accumulate ? y[r * ldy + c] + acc[r][c] : acc[r][c];
  }
}
#endif

void portable_gemm(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy, int64_t n,
                   int64_t k, int64_t o_begin, int64_t o_end) {
  constexpr int64_t NR = kPortableNR;
  const int64_t kc_step = n <= 3 ? 8 : 32;
  const int64_t chunks = (n + kPortableMaxMR - 1) / kPortableMaxMR;
  const int64_t full_end = o_begin + (o_end - o_begin) / NR * NR;
  const int64_t nb = output_block(n, 64 << 10, NR, full_end - o_begin);
  const int64_t sld = (nb + 1023) / 1024 * 1024;
  float* scratch_base = thread_scratch(n * sld + 1024);
  for (int64_t o = o_begin; o < full_end; o += nb) {
    const int64_t ob_end = std::min(o + nb, full_end);
    float* ys = away_from(scratch_base, w + o);
    for (int64_t kb = 0; kb < k; kb += kc_step) {
      const int64_t kc = std::min(kc_step, k - kb);
      for (int64_t p = o; p < ob_end; p += NR) {
        int64_t r0 = 0;
        for (int64_t c = 0; c < chunks; ++c) {
          const int64_t mr = n / chunks + (c < n % chunks ? 1 : 0);  // balanced chunks of <= 3 rows
          const float* xs = x + r0 * ldx + kb;
          const float* ws = w + kb * ldw + p;
          float* yt = ys + r0 * sld + (p - o);
          switch (mr) {
            case 1: portable_tile<1>(xs, ldx, ws, ldw, yt, sld, kc, kb > 0); break;
            case 2: portable_tile<2>(xs, ldx, ws, ldw, yt, sld, kc, kb > 0); break;
            default: portable_tile<3>(xs, ldx, ws, ldw, yt, sld, kc, kb > 0); break;
          }
          r0 += mr;
        }
      }
    }
    for (int64_t j = 0; j < n; ++j) std::memcpy(y + j * ldy + o, ys + j * sld, (ob_end - o) * sizeof(float));
  }
  // Column tail (< 16 columns): plain dot products.
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t o = full_end; o < o_end; ++o) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) acc += x[j * ldx + i] * w[i * ldw + o];
      y[j * ldy + o] = acc;
    }
  }
}

// ---- AVX2 + FMA path ----------------------------------------------------------------------------------------------

#if defined(__x86_64__)
#define DRAFTLAB_AVX2 __attribute__((target("avx2,fma")))

constexpr int64_t kMaxMR = 6;

// Splits n rows into chunks of at most max_mr rows, as even as possible. Returns the chunk count; sizes in mr[].
int split_rows(int64_t n, int64_t max_mr, int64_t* mr, int max_chunks) {
  const int64_t chunks = (n + max_mr - 1) / max_mr;
  if (chunks > max_chunks) return -1;
  for (int64_t c = 0; c < chunks; ++c) mr[c] = n / chunks + (c < n % chunks ? 1 : 0);
  return static_cast<int>(chunks);
}

// How one call is blocked; chosen from n by avx2_config().
struct Avx2Config {
  int nv;             // ymm vectors per panel row: panel width NR = 8 * nv columns (2, 4 or 8)
  int64_t max_mr;     // rows of x per chunk (<= kMaxMR)
  int64_t kc;         // weight rows per k block
  int64_t y_bytes;    // budget for the n x NB block of y kept in cache across k blocks
  int64_t pf_panels;  // software prefetch distance in panels (0: none)
};

// Measured on the AMD EPYC (Zen 3) dev machine, weights cold (DRAM) and hot (L3). n <= 4 is memory bound: short
// k blocks (8 rows, so only 8 weight rows stream at once and the hardware prefetchers keep up) and wide panels
// (>= 8 accumulators). From n ~ 5 on the FMAs dominate: 6 x 16 tiles, longer k blocks (less y traffic per FMA).
Avx2Config avx2_config(int64_t n) {
  if (n == 1) return {8, 1, 8, 64 << 10, 0};
  if (n == 2) return {4, 2, 8, 64 << 10, 4};
  if (n == 3) return {4, 3, 8, 64 << 10, 4};
  if (n == 4) return {2, 4, 8, 64 << 10, 4};
  if (n < 12) return {2, kMaxMR, 16, 64 << 10, 8};
  return {2, kMaxMR, 64, 64 << 10, 1};
}

constexpr int64_t kMaxKC = 128;  // k block limit (size of the on-stack panel copy: kMaxKC x 64 floats max)

// Lane mask for the first `count` (clamped to 0..8) floats of a vector.
DRAFTLAB_AVX2 inline __m256i lane_mask(int64_t count) {
  const int c = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(8, count)));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// MR rows x NR = 8 * NV columns micro-kernel over kc weight rows read in place (row stride ldw). The MR x NV
// accumulators live in registers for the whole k loop. accumulate: add to y instead of overwriting it.
// kMasked: the last vector only covers the lanes in mask (column tail). pf (if kPrefetch): for each row i, the
// cache lines at pf + i * ldw (NR floats) are prefetched - the same rows of a panel further on.
template <int MR, int NV, bool kMasked, bool kPrefetch, bool kPack>
DRAFTLAB_AVX2 void tile(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy, int64_t kc,
                        bool accumulate, __m256i mask, const float* pf, float* pack) {
  __m256 acc[MR][NV];
  DRAFTLAB_UNROLL
  for (int r = 0; r < MR; ++r) {
    DRAFTLAB_UNROLL
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < kc; ++i) {
    const float* wr = w + i * ldw;
    if (kPrefetch) {
      DRAFTLAB_UNROLL
      for (int l = 0; l < (NV + 1) / 2; ++l) {
        _mm_prefetch(reinterpret_cast<const char*>(pf + i * ldw + 16 * l), _MM_HINT_T0);
      }
    }
    __m256 wv[NV];
    DRAFTLAB_UNROLL
    for (int v = 0; v < NV; ++v) {
      wv[v] = (kMasked && v == NV - 1) ? _mm256_maskload_ps(wr + 8 * v, mask) : _mm256_loadu_ps(wr + 8 * v);
      if (kPack) _mm256_store_ps(pack + i * 8 * NV + 8 * v, wv[v]);
    }
    DRAFTLAB_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m256 xb = _mm256_broadcast_ss(x + r * ldx + i);
      DRAFTLAB_UNROLL
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(xb, wv[v], acc[r][v]);
    }
  }
  DRAFTLAB_UNROLL
  for (int r = 0; r < MR; ++r) {
    DRAFTLAB_UNROLL
    for (int v = 0; v < NV; ++v) {
      float* yp = y + r * ldy + 8 * v;
      const bool masked = kMasked && v == NV - 1;
      if (accumulate) {
        acc[r][v] = _mm256_add_ps(acc[r][v], masked ? _mm256_maskload_ps(yp, mask) : _mm256_loadu_ps(yp));
      }
      if (masked) {
        _mm256_maskstore_ps(yp, mask, acc[r][v]);
      } else {
        _mm256_storeu_ps(yp, acc[r][v]);
      }
    }
  }
}

// Runtime mr (1..kMaxMR) -> template.
template <int NV, bool kMasked, bool kPrefetch, bool kPack>
DRAFTLAB_AVX2 void tile_mr(int64_t mr, const float* x, int64_t ldx, const float* w, int64_t ldw, float* y,
                           int64_t ldy, int64_t kc, bool accumulate, __m256i mask, const float* pf, float* pack) {
  switch (mr) {
    case 1: tile<1, NV, kMasked, kPrefetch, kPack>(x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf, pack); break;
    case 2: tile<2, NV, kMasked, kPrefetch, kPack>(x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf, pack); break;
    case 3: tile<3, NV, kMasked, kPrefetch, kPack>(x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf, pack); break;
    case 4: tile<4, NV, kMasked, kPrefetch, kPack>(x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf, pack); break;
    case 5: tile<5, NV, kMasked, kPrefetch, kPack>(x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf, pack); break;
    default: tile<6, NV, kMasked, kPrefetch, kPack>(x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf, pack); break;
  }
}

// Rows of x in chunks (sizes mr[0..chunks)), one panel / k block. The first chunk reads the weights in place (and
// prefetches); when there are more chunks it also copies the panel into pack (kc x NR contiguous floats, L1) and
// the other chunks read that copy: no cache-set aliasing however large ldw is, aligned loads.
template <int NV, bool kMasked>
DRAFTLAB_AVX2 void chunks_tile(const int64_t* mr, int chunks, const float* x, int64_t ldx, const float* w,
                               int64_t ldw, float* y, int64_t ldy, int64_t kc, bool accumulate, __m256i mask,
                               const float* pf, float* pack) {
  constexpr int64_t NR = 8 * NV;
  if (chunks == 1) {
    if (pf != nullptr) {
      tile_mr<NV, kMasked, true, false>(mr[0], x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf, nullptr);
    } else {
      tile_mr<NV, kMasked, false, false>(mr[0], x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf, nullptr);
    }
    return;
  }
  if (pf != nullptr) {
    tile_mr<NV, kMasked, true, true>(mr[0], x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf, pack);
  } else {
    tile_mr<NV, kMasked, false, true>(mr[0], x, ldx, w, ldw, y, ldy, kc, accumulate, mask, pf, pack);
  }
  int64_t r0 = mr[0];
  for (int c = 1; c < chunks; ++c) {
    tile_mr<NV, kMasked, false, false>(mr[c], x + r0 * ldx, ldx, pack, NR, y + r0 * ldy, ldy, kc, accumulate, mask,
                                       nullptr, nullptr);
    r0 += mr[c];
  }
}

// Loop order: output blocks of NB columns, k blocks of kc rows, panels of NR columns, row chunks. Within a k block
// the panels sweep kc weight rows left to right, so each weight row is read as a contiguous run (few concurrent
// streams: the hardware prefetchers keep up) and W is read from memory exactly once. The n x NB block of y is
// accumulated in a private scratch (L1/L2) placed so that its stores do not 4K-alias the weight loads, and copied
// to y once per output block.
template <int NV>
DRAFTLAB_AVX2 void avx2_gemm_nv(const Avx2Config& cfg, const int64_t* mr, int chunks, const float* x, int64_t ldx,
                                const float* w, int64_t ldw, float* y, int64_t ldy, int64_t n, int64_t k,
                                int64_t o_begin, int64_t o_end) {
  constexpr int64_t NR = 8 * NV;
  const __m256i all = _mm256_set1_epi32(-1);
  const int64_t full_end = o_begin + (o_end - o_begin) / NR * NR;
  const int64_t nb = output_block(n, cfg.y_bytes, NR, full_end - o_begin);
  const int64_t sld = (nb + 1023) / 1024 * 1024;  // scratch row stride: 4 KB multiple, all rows alias alike
  float* scratch_base = thread_scratch(n * sld + 1024);
  alignas(64) float pack[kMaxKC * NR];
  const int64_t kc_step = std::min(cfg.kc, kMaxKC);
  for (int64_t o = o_begin; o < full_end; o += nb) {
    const int64_t ob_end = std::min(o + nb, full_end);
    const int64_t panels = (ob_end - o) / NR;
    float* ys = away_from(scratch_base, w + o);
    for (int64_t kb = 0; kb < k; kb += kc_step) {
      const int64_t kc = std::min(kc_step, k - kb);
      for (int64_t p = 0; p < panels; ++p) {
        // Prefetch target: the same rows pf_panels panels on; past this block, the next block's first panels.
        const float* pf = nullptr;
        if (cfg.pf_panels > 0) {
          const int64_t q = p + cfg.pf_panels;
          if (q < panels) {
            pf = w + kb * ldw + o + q * NR;
          } else if (kb + 2 * kc <= k) {  // the next k block has (at least) kc rows too
            pf = w + (kb + kc) * ldw + o + (q - panels) * NR;
          } else if (ob_end < full_end) {
            pf = w + ob_end + (q - panels) * NR;
          }
        }
        chunks_tile<NV, false>(mr, chunks, x + kb, ldx, w + kb * ldw + o + p * NR, ldw, ys + p * NR, sld, kc,
                               kb > 0, all, pf, pack);
      }
    }
    for (int64_t j = 0; j < n; ++j) std::memcpy(y + j * ldy + o, ys + j * sld, (ob_end - o) * sizeof(float));
  }
  // Column tail (< NR): 8 columns at a time, the last < 8 masked.
  for (int64_t o = full_end; o < o_end; o += 8) {
    const int64_t nc = std::min<int64_t>(8, o_end - o);
    const __m256i mask = lane_mask(nc);
    for (int64_t kb = 0; kb < k; kb += kc_step) {
      const int64_t kc = std::min(kc_step, k - kb);
      const float* ws = w + kb * ldw + o;
      if (nc == 8) {
        chunks_tile<1, false>(mr, chunks, x + kb, ldx, ws, ldw, y + o, ldy, kc, kb > 0, mask, nullptr, pack);
      } else {
        chunks_tile<1, true>(mr, chunks, x + kb, ldx, ws, ldw, y + o, ldy, kc, kb > 0, mask, nullptr, pack);
      }
    }
  }
}

DRAFTLAB_AVX2 void avx2_gemm(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
                             int64_t n, int64_t k, int64_t o_begin, int64_t o_end) {
  const Avx2Config cfg = avx2_config(n);
  int64_t mr[16];
  const int chunks = split_rows(n, cfg.max_mr, mr, 16);
  if (chunks < 0) {  // more than 16 chunks: not a skinny problem, but stay correct: do it in slices of rows.
    const int64_t step = 16 * cfg.max_mr;
    for (int64_t j = 0; j < n; j += step) {
      avx2_gemm(x + j * ldx, ldx, w, ldw, y + j * ldy, ldy, std::min(step, n - j), k, o_begin, o_end);
    }
    return;
  }
  switch (cfg.nv) {
    case 8: avx2_gemm_nv<8>(cfg, mr, chunks, x, ldx, w, ldw, y, ldy, n, k, o_begin, o_end); break;
    case 4: avx2_gemm_nv<4>(cfg, mr, chunks, x, ldx, w, ldw, y, ldy, n, k, o_begin, o_end); break;
    default: avx2_gemm_nv<2>(cfg, mr, chunks, x, ldx, w, ldw, y, ldy, n, k, o_begin, o_end); break;
  }
}

// DRAFTLAB_ISA does not apply here: the path depends on the CPU alone.
bool cpu_has_avx2_fma() { return cpu_features().avx2 && cpu_features().fma; }
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
    return Dispatch{portable_gemm, "portable", 2};
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
