// DRAFTLAB_UNROLL: fully unroll the loop that follows, early enough that small accumulator arrays in SIMD kernels
// become registers (GCC and Clang spell the pragma differently).
#pragma once

#if defined(__clang__)
#define DRAFTLAB_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define DRAFTLAB_UNROLL _Pragma("GCC unroll 16")
#else
#define DRAFTLAB_UNROLL
#endif
