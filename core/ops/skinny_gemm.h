// Skinny GEMM: y = x · Wᵀ for a handful of rows of x (n = 1..64 tokens verified at once), torch-free.
//
// OpenBLAS streams a weight matrix at memory bandwidth for n = 1 (GEMV), but for small n > 1 its GEMM packs the
// whole weight matrix first, so verifying 2 tokens costs about 4x one token. skinny_gemm_f32 reads each weight
// once per call whatever n is (register-blocked micro-kernel, see skinny_gemm.cpp), so n = 2..8 costs little more
// than n = 1 while the call is memory bound.
#pragma once

#include <cstdint>

namespace draftlab {

// y[j * ldy + o] = sum_{i<k} x[j * ldx + i] * w[i * ldw + o]   for j < n, o in [o_begin, o_end).
// w is the weight stored [k, out] row-major (a column-major [out, k] matrix). Single-threaded: callers split
// [0, out) across threads (ranges should be multiples of 64 where possible; any range must work).
// Only y[j * ldy + o] for j < n, o in [o_begin, o_end) is written. k = 0 writes zeros.
void skinny_gemm_f32(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
                     int64_t n, int64_t k, int64_t o_begin, int64_t o_end);

// Largest n for which skinny_gemm_f32 is expected to beat BLAS on this CPU (callers use BLAS above it).
int64_t skinny_gemm_max_rows();

// Name of the code path chosen at run time ("avx2+fma" / "portable").
const char* skinny_gemm_isa();

// ---- for tests and benchmarks -----------------------------------------------------------------------------------
// The portable (scalar, auto-vectorised) path, whatever the CPU. Same contract as skinny_gemm_f32.
void skinny_gemm_f32_portable(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
                              int64_t n, int64_t k, int64_t o_begin, int64_t o_end);

// True when this CPU and build can run the AVX2+FMA path (skinny_gemm_f32 then uses it).
bool skinny_gemm_has_avx2();

}  // namespace draftlab
