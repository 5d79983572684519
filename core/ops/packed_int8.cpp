// BlockDot::Int8 kernels: see packed_int8.h for the layout and the arithmetic every kernel performs.
//
// Tiles as in packed_matrix.cpp (MR rows x NP panels, panel_loop.h's loop), with two accumulators per (row, panel):
// a 32-bit integer sum over the current block and the float32 sum over blocks.
//   AVX512-VNNI (32 zmm): vpdpbusd multiplies the unsigned weight bytes by the signed x bytes and adds groups of 4
//     into 32-bit lanes (the integer sums start at -offset x sum(x), taking the unsigned weights' offset back).
//     MR 1 -> NP 8, 2 -> 6, 3 -> 4, 4 -> 3, 5..6 -> 2 (2 x MR x NP <= 24 accumulators); rows in chunks of <= 6.
//   256-bit (16 ymm, a panel is 2 ymm; packed_int8_ymm.inc): vpmaddubsw + vpmaddwd on AVX2, or vpdpbusd where the
//     CPU has AVX-VNNI. MR 1 -> NP 2, else 1; rows in chunks of <= 4.
//   Portable: the same sums in plain integer loops, std::fmaf per block.
#include "core/ops/packed_int8.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/base/cpu_features.h"
#include "core/io/ggml_quant.h"
#include "core/ops/panel_loop.h"
#include "core/ops/unroll.h"

// GCC 12 warns inside its own _mm512_cvtepi32_ps / _mm512_cvtph_ps (an intentionally undefined pass-through operand).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace draftlab {

void quantize_rows(const float* x, int64_t ldx, int64_t n, int64_t in, QuantizedRows& out) {
  if (in % packed_int8::kBlock != 0)
    throw std::invalid_argument("quantize_rows: rows of a multiple of 32 values expected, got " + std::to_string(in));
  const int64_t blocks = in / packed_int8::kBlock;
  out.n = n;
  out.in = in;
  out.q.resize(static_cast<size_t>(n * in));
  out.scale.resize(static_cast<size_t>(n * blocks));
  out.sum.resize(static_cast<size_t>(n * blocks));
  uint8_t block[2 + packed_int8::kBlock];
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      quantize_q8_0(x + r * ldx + b * packed_int8::kBlock, packed_int8::kBlock, block);
      uint16_t d;
      std::memcpy(&d, block, 2);
      out.scale[r * blocks + b] = half_to_float(d);
      int32_t sum = 0;
      for (int64_t j = 0; j < packed_int8::kBlock; ++j) {
        const auto v = static_cast<int8_t>(block[2 + j]);
        out.q[r * in + b * packed_int8::kBlock + j] = v;
        sum += v;
      }
      out.sum[r * blocks + b] = sum;
    }
  }
}

namespace packed_int8 {
namespace {

using panel_loop::kPrefetchBytes;
using panel_loop::multiply_with;
using panel_loop::P;
using panel_loop::Prefetch;
using panel_loop::prefetch_next_line;
using panel_loop::prefetch_step16;

constexpr int64_t groups(WeightStorage s) { return s == WeightStorage::Q8_0 ? 8 : 4; }  // 64-byte groups per block
constexpr int64_t values_bytes(WeightStorage s, int64_t in) { return in / kBlock * groups(s) * 64; }
// What an unsigned weight byte stands above its signed value: q8_0 q + 128, q4_0 q - 8 + 8.
constexpr int32_t weight_offset(WeightStorage s) { return s == WeightStorage::Q8_0 ? 128 : 8; }

inline const uint16_t* scales_of(WeightStorage s, const uint8_t* panel, int64_t in) {
  return reinterpret_cast<const uint16_t*>(panel + values_bytes(s, in));
}

// Where input j (0..31) of block b, lane c sits, and its signed value.
template <WeightStorage S>
inline int weight_q(const uint8_t* panel, int64_t b, int64_t j, int64_t c) {
  if constexpr (S == WeightStorage::Q8_0) {
    return static_cast<int>(panel[(b * 8 + j / 4) * 64 + c * 4 + j % 4]) - 128;
  } else {
    const uint8_t byte = panel[(b * 4 + j / 8) * 64 + c * 4 + j % 4];
    return (j % 8 < 4 ? byte & 15 : byte >> 4) - 8;
  }
}

// The quantized rows a tile reads, from row r0 on.
struct Q8Rows {
  const int8_t* q;
  const float* scale;
  const int32_t* sum;
  int64_t in, blocks;
  Q8Rows from(int64_t r) const { return {q + r * in, scale + r * blocks, sum + r * blocks, in, blocks}; }
  // x bytes i .. i + 3 of row r as one 32-bit lane.
  int32_t quad(int64_t r, int64_t i) const {
    int32_t v;
    std::memcpy(&v, q + r * in + i, 4);
    return v;
  }
  float d(int64_t r, int64_t b) const { return scale[r * blocks + b]; }
  int32_t s(int64_t r, int64_t b) const { return sum[r * blocks + b]; }
};

// ---- portable ----------------------------------------------------------------------------------------------------

template <WeightStorage S>
void portable_tile(const Q8Rows& x, int64_t mr, const uint8_t* panel, int64_t k, float* y, int64_t ldy,
                   int64_t cols) {
  const uint16_t* scales = scales_of(S, panel, k);
  for (int64_t r = 0; r < mr; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float acc = 0.0f;
      for (int64_t b = 0; b < x.blocks; ++b) {
        int32_t s = 0;
        for (int64_t j = 0; j < kBlock; ++j) s += weight_q<S>(panel, b, j, c) * x.q[r * x.in + b * kBlock + j];
        acc = std::fmaf(static_cast<float>(s), half_to_float(scales[b * P + c]) * x.d(r, b), acc);
      }
      y[r * ldy + c] = acc;
    }
  }
}

struct PortableKernels {
  static constexpr int64_t kMaxRows = 8;
  static constexpr int panels_for(int) { return 1; }
  static constexpr int group_panels(int) { return 1; }
  template <WeightStorage S, int MR, int NP>
  static void tile(const Q8Rows& x, const uint8_t* panels, int64_t /*panel_bytes*/, int64_t k, float* y, int64_t ldy,
                   int64_t cols, const Prefetch&) {
    portable_tile<S>(x, MR, panels, k, y, ldy, cols);
  }
};

#if defined(__x86_64__)
// ---- 256-bit: AVX2 vpmaddubsw, AVX-VNNI vpdpbusd ----------------------------------------------------------------
// packed_int8_ymm.inc is one kernel family written once and included once per instruction, each copy in a namespace
// of its own with its own target attribute (a function's instruction set is fixed where it is defined).
#define DRAFTLAB_YMM_TARGET __attribute__((target("avx2,fma,f16c")))
namespace ymm_maddubs {
#include "core/ops/packed_int8_ymm.inc"
}  // namespace ymm_maddubs
#undef DRAFTLAB_YMM_TARGET

// AVX-VNNI (VEX encoding): Intel client CPUs since Alder Lake have it without AVX-512.
#define DRAFTLAB_YMM_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define DRAFTLAB_YMM_DPBUSD _mm256_dpbusd_avx_epi32
namespace ymm_avx_vnni {
#include "core/ops/packed_int8_ymm.inc"
}  // namespace ymm_avx_vnni
#undef DRAFTLAB_YMM_TARGET
#undef DRAFTLAB_YMM_DPBUSD

// The same instruction in its AVX512-VNNI + VL encoding: the AVX-VNNI kernel's code, testable on AVX-512 CPUs
// that lack AVX-VNNI (this one): tests only.
#define DRAFTLAB_YMM_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")))
#define DRAFTLAB_YMM_DPBUSD _mm256_dpbusd_epi32
namespace ymm_avx512_vnni {
#include "core/ops/packed_int8_ymm.inc"
}  // namespace ymm_avx512_vnni
#undef DRAFTLAB_YMM_TARGET
#undef DRAFTLAB_YMM_DPBUSD

// ---- AVX512-VNNI: vpdpbusd ---------------------------------------------------------------------------------------
#define DRAFTLAB_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

template <WeightStorage S, int MR, int NP>
DRAFTLAB_VNNI void vnni_tile(const Q8Rows& x, const uint8_t* panels, int64_t panel_bytes, int64_t k, float* y,
                             int64_t ldy, int64_t cols, const Prefetch& pf) {
  constexpr int64_t G = groups(S);
  const int64_t blocks = k / kBlock;
  const __m512i low4 = _mm512_set1_epi8(15);
  __m512 acc[MR][NP];
  DRAFTLAB_UNROLL
  for (int r = 0; r < MR; ++r) {
    DRAFTLAB_UNROLL
    for (int q = 0; q < NP; ++q) acc[r][q] = _mm512_setzero_ps();
  }
  const int64_t step16 = prefetch_step16(pf, blocks);
  for (int64_t b = 0; b < blocks; ++b) {
    prefetch_next_line(pf, b, step16);
    __m512i isum[MR][NP];  // starts at -offset x sum(x): the unsigned weights' offset taken back up front
    DRAFTLAB_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m512i start = _mm512_set1_epi32(-weight_offset(S) * x.s(r, b));
      DRAFTLAB_UNROLL
      for (int q = 0; q < NP; ++q) isum[r][q] = start;
    }
    for (int64_t g = 0; g < G; ++g) {
      DRAFTLAB_UNROLL
      for (int q = 0; q < NP; ++q) {
        const uint8_t* v = panels + q * panel_bytes + (b * G + g) * 64;
        if (pf.in_stream) _mm_prefetch(reinterpret_cast<const char*>(v + kPrefetchBytes), _MM_HINT_T0);
        const __m512i raw = _mm512_loadu_si512(v);
        if constexpr (S == WeightStorage::Q8_0) {
          DRAFTLAB_UNROLL
          for (int r = 0; r < MR; ++r)
            isum[r][q] = _mm512_dpbusd_epi32(isum[r][q], raw, _mm512_set1_epi32(x.quad(r, b * kBlock + g * 4)));
        } else {
          const __m512i lo = _mm512_and_si512(raw, low4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
          DRAFTLAB_UNROLL
          for (int r = 0; r < MR; ++r) {
            isum[r][q] = _mm512_dpbusd_epi32(isum[r][q], lo, _mm512_set1_epi32(x.quad(r, b * kBlock + g * 8)));
            isum[r][q] = _mm512_dpbusd_epi32(isum[r][q], hi, _mm512_set1_epi32(x.quad(r, b * kBlock + g * 8 + 4)));
          }
        }
      }
    }
    DRAFTLAB_UNROLL
    for (int q = 0; q < NP; ++q) {
      const uint16_t* sc = scales_of(S, panels + q * panel_bytes, k) + b * P;
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc)));
      DRAFTLAB_UNROLL
      for (int r = 0; r < MR; ++r)
        acc[r][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][q]), _mm512_mul_ps(dw, _mm512_set1_ps(x.d(r, b))),
                                    acc[r][q]);
    }
  }
  DRAFTLAB_UNROLL
  for (int q = 0; q < NP; ++q) {
    const int64_t left = cols - q * P;
    if (left <= 0) break;
    const __mmask16 m = left >= P ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
    DRAFTLAB_UNROLL
    for (int r = 0; r < MR; ++r) _mm512_mask_storeu_ps(y + r * ldy + q * P, m, acc[r][q]);
  }
}

constexpr int vnni_panels_for(int mr) {
  return mr <= 1 ? 8 : mr == 2 ? 6 : mr == 3 ? 4 : mr == 4 ? 3 : 2;
}

struct VnniKernels {
  static constexpr int64_t kMaxRows = 6;
  static constexpr int panels_for(int mr) { return vnni_panels_for(mr); }
  static constexpr int group_panels(int largest_chunk) { return vnni_panels_for(largest_chunk); }
  template <WeightStorage S, int MR, int NP>
  static void tile(const Q8Rows& x, const uint8_t* panels, int64_t panel_bytes, int64_t k, float* y, int64_t ldy,
                   int64_t cols, const Prefetch& pf) {
    vnni_tile<S, MR, NP>(x, panels, panel_bytes, k, y, ldy, cols, pf);
  }
};
#endif  // __x86_64__

using MultiplyFn = void (*)(const uint8_t*, int64_t, int64_t, int64_t, const Q8Rows&, int64_t, float*, int64_t,
                            int64_t, int64_t);

template <WeightStorage S>
MultiplyFn pick(Int8Kernel kernel) {
  switch (kernel) {
#if defined(__x86_64__)
    case Int8Kernel::Maddubs256: return &multiply_with<ymm_maddubs::Kernels, S, Q8Rows>;
    case Int8Kernel::AvxVnni256: return &multiply_with<ymm_avx_vnni::Kernels, S, Q8Rows>;
    case Int8Kernel::Avx512Vnni256: return &multiply_with<ymm_avx512_vnni::Kernels, S, Q8Rows>;
    case Int8Kernel::Avx512Vnni512: return &multiply_with<VnniKernels, S, Q8Rows>;
#endif
    default: return &multiply_with<PortableKernels, S, Q8Rows>;
  }
}

}  // namespace

int64_t panel_bytes(WeightStorage s, int64_t in) {
  const int64_t bytes = values_bytes(s, in) + in / kBlock * P * 2;
  return (bytes + 63) / 64 * 64;
}

void put_block(WeightStorage s, uint8_t* panel, int64_t in, int64_t b, int64_t lane, const uint8_t* ggml_block) {
  std::memcpy(panel + values_bytes(s, in) + (b * P + lane) * 2, ggml_block, 2);
  for (int64_t j = 0; j < kBlock; ++j) {
    if (s == WeightStorage::Q8_0) {
      panel[(b * 8 + j / 4) * 64 + lane * 4 + j % 4] = static_cast<uint8_t>(static_cast<int8_t>(ggml_block[2 + j]) + 128);
    } else {  // ggml's byte j holds q_j (low nibble) and q_{j+16} (high)
      const uint8_t q = j < 16 ? ggml_block[2 + j] & 15 : ggml_block[2 + j - 16] >> 4;
      panel[(b * 4 + j / 8) * 64 + lane * 4 + j % 4] |= static_cast<uint8_t>(j % 8 < 4 ? q : q << 4);
    }
  }
}

float value(WeightStorage s, const uint8_t* panel, int64_t in, int64_t i, int64_t lane) {
  const int64_t b = i / kBlock, j = i % kBlock;
  const int q = s == WeightStorage::Q8_0 ? weight_q<WeightStorage::Q8_0>(panel, b, j, lane)
                                         : weight_q<WeightStorage::Q4_0>(panel, b, j, lane);
  return half_to_float(scales_of(s, panel, in)[b * P + lane]) * static_cast<float>(q);
}

const char* int8_kernel_name(Int8Kernel k) {
  switch (k) {
    case Int8Kernel::Portable: return "scalar";
    case Int8Kernel::Maddubs256: return "vpmaddubsw";
    case Int8Kernel::AvxVnni256: return "vpdpbusd ymm (AVX-VNNI)";
    case Int8Kernel::Avx512Vnni256: return "vpdpbusd ymm (AVX512-VNNI)";
    case Int8Kernel::Avx512Vnni512: return "vpdpbusd zmm";
  }
  return "?";
}

bool int8_kernel_runs(Int8Kernel k) {
  // The AVX2 level: AVX2 + FMA + F16C, on x86-64.
  static const bool avx2 = host_kernel_isa() != KernelIsa::Portable, avx_vnni = avx2 && cpu_features().avx_vnni,
                    avx512_vnni = avx2 && cpu_features().avx512_vnni && cpu_features().avx512vl;
  switch (k) {
    case Int8Kernel::Portable: return true;
    case Int8Kernel::Maddubs256: return avx2;
    case Int8Kernel::AvxVnni256: return avx_vnni;
    case Int8Kernel::Avx512Vnni256:
    case Int8Kernel::Avx512Vnni512: return avx512_vnni;
  }
  return false;
}

Int8Kernel int8_kernel_for(KernelIsa isa) {
  if (isa == KernelIsa::Portable) return Int8Kernel::Portable;
  if (isa == KernelIsa::Avx512 && int8_kernel_runs(Int8Kernel::Avx512Vnni512)) return Int8Kernel::Avx512Vnni512;
  return int8_kernel_runs(Int8Kernel::AvxVnni256) ? Int8Kernel::AvxVnni256 : Int8Kernel::Maddubs256;
}

void multiply(WeightStorage s, Int8Kernel kernel, const uint8_t* data, int64_t out, int64_t in,
              const QuantizedRows& x, float* y, int64_t ldy, int64_t p0, int64_t p1) {
  const Q8Rows rows{x.q.data(), x.scale.data(), x.sum.data(), x.in, x.blocks()};
  const MultiplyFn fn =
      s == WeightStorage::Q8_0 ? pick<WeightStorage::Q8_0>(kernel) : pick<WeightStorage::Q4_0>(kernel);
  fn(data, packed_int8::panel_bytes(s, in), out, in, rows, x.n, y, ldy, p0, p1);
}

}  // namespace packed_int8

const char* int8_dot_instruction(KernelIsa isa) {
  return packed_int8::int8_kernel_name(packed_int8::int8_kernel_for(isa));
}

}  // namespace draftlab
