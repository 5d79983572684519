// fma_peak.h - the float32 FMA rate one core reaches with an ISA's vectors, measured, for the benchmarks' roofline
// lines ("GFLOP/s beside the peak"). Twelve independent FMA chains (more than two pipes x four cycles of latency
// need), about 0.1 s per run, median of three. Header-only: benchmarks only.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/ops/packed_matrix.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace draftlab::bench {

#if defined(__x86_64__)
constexpr int kPeakChains = 12;
constexpr long kPeakIterations = 4000000;

inline double gflops(double seconds, int lanes) { return kPeakIterations * kPeakChains * lanes * 2.0 / seconds / 1e9; }

#define DRAFTLAB_FMA_PEAK_RUN(NAME, ATTR, VEC, SET1, FMA, LANES)                                   \
  ATTR inline double NAME() {                                                                     \
    VEC a[kPeakChains];                                                                           \
    for (int i = 0; i < kPeakChains; ++i) a[i] = SET1(1.0f + 1e-3f * i);                           \
    const VEC mul = SET1(0.9999f), add = SET1(1e-4f);                                             \
    const auto t0 = std::chrono::steady_clock::now();                                             \
    for (long k = 0; k < kPeakIterations; ++k) {                                                  \
      _Pragma("GCC unroll 12") for (int i = 0; i < kPeakChains; ++i) a[i] = FMA(a[i], mul, add);   \
    }                                                                                             \
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); \
    volatile float sink = 0.0f;                                                                   \
    for (int i = 0; i < kPeakChains; ++i) sink = sink + reinterpret_cast<const float*>(&a[i])[0]; \
    return gflops(s, LANES);                                                                      \
  }
DRAFTLAB_FMA_PEAK_RUN(avx2_fma_run, __attribute__((target("avx2,fma"))), __m256, _mm256_set1_ps, _mm256_fmadd_ps, 8)
DRAFTLAB_FMA_PEAK_RUN(avx512_fma_run, __attribute__((target("avx512f"))), __m512, _mm512_set1_ps, _mm512_fmadd_ps, 16)
#undef DRAFTLAB_FMA_PEAK_RUN
#endif

// GFLOP/s (2 per FMA lane) for the vectors of `isa`; 0 for the portable path (not measured).
inline double measured_fma_peak_gflops(KernelIsa isa) {
  std::vector<double> runs;
  for (int r = 0; r < 3; ++r) {
#if defined(__x86_64__)
    if (isa == KernelIsa::Avx512) runs.push_back(avx512_fma_run());
    else if (isa == KernelIsa::Avx2) runs.push_back(avx2_fma_run());
    else return 0.0;
#else
    (void)isa;
    return 0.0;
#endif
  }
  std::sort(runs.begin(), runs.end());
  return runs[1];
}

}  // namespace draftlab::bench
