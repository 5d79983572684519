// PackedMatrix kernels. See packed_matrix.h for the layout and the row-independence contract.
//
// Tiles: MR rows of x by NP panels (NP * 16 output columns). The MR x NP accumulators live in registers for the
// whole input; per input index the tile loads NP panel vectors (widening half precision) and issues MR * NP FMAs.
// MR and NP are chosen so the accumulators plus the loaded vectors fit the register file and there are always at
// least 8 independent FMA chains (two FMA pipes, four cycles of latency), 10-12 where the rows allow:
//   AVX-512 (32 zmm): MR 1..2 -> NP 8, 3..4 -> 6, 5..6 -> 4, 7..8 -> 3.            rows cut into chunks of <= 8
//   AVX2    (16 ymm, a panel is 2 ymm): MR 1 -> NP 6, 2 -> 3, 3 -> 2, 4 -> 1.      rows cut into chunks of <= 4
//   (5- and 6-row AVX2 tiles with 10-12 accumulators measured slower than 4-row ones on Zen 5, so none are built)
//
// Loop order: groups of panels outer, row chunks inner; each chunk walks the group in tiles of its own NP. A
// group's panels (tens of KB) stay in L1/L2 while every chunk reads them, so memory sees each weight once per call.
// Streaming overlaps the arithmetic: the tiles of group g prefetch group g + 1 into L2, a slice each, so that by the
// time the next group starts its weights are already near (without it a call paid memory time plus FMA time, and a
// one-chunk call began every group on cold misses); with one chunk, software prefetch also runs a fixed distance
// ahead in each panel's stream.
#include "core/ops/packed_matrix.h"

#include "core/io/ggml_quant.h"
#include "core/ops/packed_int8.h"
#include "core/ops/panel_loop.h"
#include "core/ops/unroll.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// GCC 12 warns inside its own _mm512_cvtph_ps (an intentionally undefined pass-through operand).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace draftlab {

const char* weight_storage_name(WeightStorage s) {
  switch (s) {
    case WeightStorage::Float32: return "float32";
    case WeightStorage::Float16: return "float16";
    case WeightStorage::BFloat16: return "bfloat16";
    case WeightStorage::Q8_0: return "q8_0";
    case WeightStorage::Q4_0: return "q4_0";
  }
  return "?";
}

int64_t panel_bytes(WeightStorage s, int64_t in) {
  constexpr int64_t P = PackedMatrix::kPanel;
  switch (s) {
    case WeightStorage::Float32: return in * P * 4;
    case WeightStorage::Float16:
    case WeightStorage::BFloat16: return in * P * 2;
    case WeightStorage::Q8_0: return in * P + in / kGgmlQuantBlock * P * 4;  // int8 values, then float32 scales
    case WeightStorage::Q4_0: return in * P / 2 + in / kGgmlQuantBlock * P * 4;  // nibbles, then float32 scales
  }
  return 0;
}

const char* block_dot_name(BlockDot d) { return d == BlockDot::Int8 ? "int8" : "float"; }

namespace {

using panel_loop::FloatRows;
using panel_loop::kPrefetchBytes;
using panel_loop::multiply_with;
using panel_loop::P;
using panel_loop::Prefetch;
using panel_loop::prefetch_next_line;
using panel_loop::prefetch_step16;
// ---- portable ----------------------------------------------------------------------------------------------------

template <WeightStorage S>
inline float load_scalar(const uint8_t* p, int64_t idx) {
  if constexpr (S == WeightStorage::Float32) {
    float f;
    std::memcpy(&f, p + idx * 4, 4);
    return f;
  } else {
    uint16_t h;
    std::memcpy(&h, p + idx * 2, 2);
    return S == WeightStorage::Float16 ? half_to_float(h) : bfloat16_to_float(h);
  }
}

// Block-quantized panels. Q8_0: int8 values as the float layouts (input i, lane c at i * P + c); Q4_0: 4-bit values
// q in 0..15 standing for q - 8, two inputs a byte (inputs 2j and 2j + 1 of lane c in the low and high nibble of
// byte j * P + c). Then one float32 scale per block of 32 inputs and lane (block b, lane c: float b * P + c after
// the values, k the panel's inputs). A weight is scale * value: exact in float32, so every kernel below
// multiplies by exactly the dequantized value.
constexpr bool block_quantized(WeightStorage s) { return s == WeightStorage::Q8_0 || s == WeightStorage::Q4_0; }
// Bytes per lane in a row of 16 lanes (Q4_0: a byte holds the lane's value for two inputs).
template <WeightStorage S>
constexpr int64_t lane_bytes() {
  return S == WeightStorage::Float32 ? 4 : block_quantized(S) ? 1 : 2;
}
// Where input i's row of 16 lanes starts in a panel (Q4_0: the byte row holding inputs i & ~1 and i | 1).
template <WeightStorage S>
inline const uint8_t* weight_row(const uint8_t* panel, int64_t i) {
  if constexpr (S == WeightStorage::Q4_0) return panel + (i >> 1) * P;
  return panel + i * P * lane_bytes<S>();
}
template <WeightStorage S>
inline const float* block_scales(const uint8_t* panel, int64_t k, int64_t i) {
  const int64_t values = S == WeightStorage::Q4_0 ? k * P / 2 : k * P;
  return reinterpret_cast<const float*>(panel + values) + (i / kGgmlQuantBlock) * P;
}
template <WeightStorage S>
inline float block_value(const uint8_t* panel, int64_t k, int64_t i, int64_t c) {
  const uint8_t byte = weight_row<S>(panel, i)[c];
  const int q = S == WeightStorage::Q8_0 ? static_cast<int8_t>(byte) : ((byte >> ((i & 1) * 4)) & 15) - 8;
  return block_scales<S>(panel, k, i)[c] * static_cast<float>(q);
}

// Plain multiply-add: this file is built for baseline x86-64 (no FMA), so the compiler cannot contract it either;
// every row runs the same sequence, which is all row independence needs within this path.
template <WeightStorage S>
void portable_tile(const float* x, int64_t ldx, int64_t mr, const uint8_t* panel, int64_t k, float* y, int64_t ldy,
                   int64_t cols) {
  float acc[8][P];
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t c = 0; c < P; ++c) acc[r][c] = 0.0f;
  float w[P];
  for (int64_t i = 0; i < k; ++i) {
    if constexpr (block_quantized(S)) {
      for (int64_t c = 0; c < P; ++c) w[c] = block_value<S>(panel, k, i, c);
    } else {
      for (int64_t c = 0; c < P; ++c) w[c] = load_scalar<S>(panel, i * P + c);
    }
    for (int64_t r = 0; r < mr; ++r) {
      const float xv = x[r * ldx + i];
      for (int64_t c = 0; c < P; ++c) acc[r][c] += xv * w[c];
    }
  }
  for (int64_t r = 0; r < mr; ++r) std::memcpy(y + r * ldy, acc[r], static_cast<size_t>(cols) * sizeof(float));
}

struct PortableKernels {
  static constexpr int64_t kMaxRows = 8;
  static constexpr int panels_for(int) { return 1; }
  static constexpr int group_panels(int) { return 1; }
  template <WeightStorage S, int MR, int NP>
  static void tile(const FloatRows& x, const uint8_t* panels, int64_t /*panel_bytes*/, int64_t k, float* y,
                   int64_t ldy, int64_t cols, const Prefetch&) {
    portable_tile<S>(x.x, x.ldx, MR, panels, k, y, ldy, cols);
  }
};

// ---- AVX2 + FMA + F16C -------------------------------------------------------------------------------------------
#if defined(__x86_64__)
#define DRAFTLAB_AVX2 __attribute__((target("avx2,fma,f16c")))

// Lanes lane .. lane + 7 of input i in a panel of k inputs, widened to float32 (block types: value x scale).
template <WeightStorage S>
DRAFTLAB_AVX2 inline __m256 load8(const uint8_t* panel, int64_t k, int64_t i, int lane) {
  const uint8_t* p = weight_row<S>(panel, i) + lane * lane_bytes<S>();
  if constexpr (S == WeightStorage::Float32) {
    return _mm256_load_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (block_quantized(S)) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    __m256i q;
    if constexpr (S == WeightStorage::Q8_0) {
      q = _mm256_cvtepi8_epi32(bytes);
    } else {
      const __m256i nibbles = _mm256_srl_epi32(_mm256_cvtepu8_epi32(bytes), _mm_cvtsi32_si128(static_cast<int>(i & 1) * 4));
      q = _mm256_sub_epi32(_mm256_and_si256(nibbles, _mm256_set1_epi32(15)), _mm256_set1_epi32(8));
    }
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_load_ps(block_scales<S>(panel, k, i) + lane));
  } else if constexpr (S == WeightStorage::Float16) {
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
  } else {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
}

// MR rows x NP panels; `cols` valid columns in the tile (NP * 16 unless it holds the matrix's last panel).
template <WeightStorage S, int MR, int NP>
DRAFTLAB_AVX2 void avx2_tile(const float* x, int64_t ldx, const uint8_t* panels, int64_t panel_bytes, int64_t k,
                             float* y, int64_t ldy, int64_t cols, const Prefetch& pf) {
  __m256 acc[MR][NP][2];
  DRAFTLAB_UNROLL
  for (int r = 0; r < MR; ++r) {
    DRAFTLAB_UNROLL
    for (int q = 0; q < NP; ++q) acc[r][q][0] = acc[r][q][1] = _mm256_setzero_ps();
  }
  const int64_t step16 = prefetch_step16(pf, k);
  for (int64_t i = 0; i < k; ++i) {
    prefetch_next_line(pf, i, step16);
    DRAFTLAB_UNROLL
    for (int q = 0; q < NP; ++q) {
      const uint8_t* panel = panels + q * panel_bytes;
      if (pf.in_stream)
        _mm_prefetch(reinterpret_cast<const char*>(weight_row<S>(panel, i) + kPrefetchBytes), _MM_HINT_T0);
      const __m256 w0 = load8<S>(panel, k, i, 0), w1 = load8<S>(panel, k, i, 8);
      DRAFTLAB_UNROLL
      for (int r = 0; r < MR; ++r) {
        const __m256 xb = _mm256_broadcast_ss(x + r * ldx + i);
        acc[r][q][0] = _mm256_fmadd_ps(xb, w0, acc[r][q][0]);
        acc[r][q][1] = _mm256_fmadd_ps(xb, w1, acc[r][q][1]);
      }
    }
  }
  if (cols == NP * P) {
    DRAFTLAB_UNROLL
    for (int r = 0; r < MR; ++r) {
      DRAFTLAB_UNROLL
      for (int q = 0; q < NP; ++q) {
        _mm256_storeu_ps(y + r * ldy + q * P, acc[r][q][0]);
        _mm256_storeu_ps(y + r * ldy + q * P + 8, acc[r][q][1]);
      }
    }
  } else {
    // Unrolled like the main loop: an accumulator indexed in a rolled loop would make GCC keep the whole array
    // in memory and store it on every input index (12 stores per 12 FMAs: the store ports, not the FMAs, bound).
    alignas(32) float tmp[NP * P];
    DRAFTLAB_UNROLL
    for (int r = 0; r < MR; ++r) {
      DRAFTLAB_UNROLL
      for (int q = 0; q < NP; ++q) {
        _mm256_store_ps(tmp + q * P, acc[r][q][0]);
        _mm256_store_ps(tmp + q * P + 8, acc[r][q][1]);
      }
      std::memcpy(y + r * ldy, tmp, static_cast<size_t>(cols) * sizeof(float));
    }
  }
}

// 12 accumulators (of 16 ymm) wherever the rows allow; a chunk of 4 rows keeps 8.
constexpr int avx2_panels_for(int mr) { return mr == 1 ? 6 : mr == 2 ? 3 : mr == 3 ? 2 : 1; }

struct Avx2Kernels {
  static constexpr int64_t kMaxRows = 4;
  static constexpr int panels_for(int mr) { return avx2_panels_for(mr); }
  // Six panels make whole tiles for every chunk size (NP 6, 3, 2, 1).
  static constexpr int group_panels(int) { return 6; }
  template <WeightStorage S, int MR, int NP>
  static void tile(const FloatRows& x, const uint8_t* panels, int64_t panel_bytes, int64_t k, float* y, int64_t ldy,
                   int64_t cols, const Prefetch& pf) {
    avx2_tile<S, MR, NP>(x.x, x.ldx, panels, panel_bytes, k, y, ldy, cols, pf);
  }
};

// ---- AVX-512 -----------------------------------------------------------------------------------------------------
#define DRAFTLAB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

// The 16 lanes of input i in a panel of k inputs, widened to float32 (block types: value x scale).
template <WeightStorage S>
DRAFTLAB_AVX512 inline __m512 load16(const uint8_t* panel, int64_t k, int64_t i) {
  const uint8_t* p = weight_row<S>(panel, i);
  if constexpr (S == WeightStorage::Float32) {
    return _mm512_load_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (block_quantized(S)) {
    const __m128i bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(p));
    __m512i q;
    if constexpr (S == WeightStorage::Q8_0) {
      q = _mm512_cvtepi8_epi32(bytes);
    } else {
      const __m512i nibbles = _mm512_srl_epi32(_mm512_cvtepu8_epi32(bytes), _mm_cvtsi32_si128(static_cast<int>(i & 1) * 4));
      q = _mm512_sub_epi32(_mm512_and_si512(nibbles, _mm512_set1_epi32(15)), _mm512_set1_epi32(8));
    }
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_load_ps(block_scales<S>(panel, k, i)));
  } else if constexpr (S == WeightStorage::Float16) {
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
  } else {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
}

template <WeightStorage S, int MR, int NP>
DRAFTLAB_AVX512 void avx512_tile(const float* x, int64_t ldx, const uint8_t* panels, int64_t panel_bytes, int64_t k,
                                 float* y, int64_t ldy, int64_t cols, const Prefetch& pf) {
  __m512 acc[MR][NP];
  DRAFTLAB_UNROLL
  for (int r = 0; r < MR; ++r) {
    DRAFTLAB_UNROLL
    for (int q = 0; q < NP; ++q) acc[r][q] = _mm512_setzero_ps();
  }
  const int64_t step16 = prefetch_step16(pf, k);
  for (int64_t i = 0; i < k; ++i) {
    prefetch_next_line(pf, i, step16);
    __m512 w[NP];
    DRAFTLAB_UNROLL
    for (int q = 0; q < NP; ++q) {
      const uint8_t* panel = panels + q * panel_bytes;
      if (pf.in_stream)
        _mm_prefetch(reinterpret_cast<const char*>(weight_row<S>(panel, i) + kPrefetchBytes), _MM_HINT_T0);
      w[q] = load16<S>(panel, k, i);
    }
    DRAFTLAB_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m512 xb = _mm512_set1_ps(x[r * ldx + i]);
      DRAFTLAB_UNROLL
      for (int q = 0; q < NP; ++q) acc[r][q] = _mm512_fmadd_ps(xb, w[q], acc[r][q]);
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

constexpr int avx512_panels_for(int mr) { return mr <= 2 ? 8 : mr <= 4 ? 6 : mr <= 6 ? 4 : 3; }

struct Avx512Kernels {
  static constexpr int64_t kMaxRows = 8;
  static constexpr int panels_for(int mr) { return avx512_panels_for(mr); }
  static constexpr int group_panels(int largest_chunk) { return avx512_panels_for(largest_chunk); }
  template <WeightStorage S, int MR, int NP>
  static void tile(const FloatRows& x, const uint8_t* panels, int64_t panel_bytes, int64_t k, float* y, int64_t ldy,
                   int64_t cols, const Prefetch& pf) {
    avx512_tile<S, MR, NP>(x.x, x.ldx, panels, panel_bytes, k, y, ldy, cols, pf);
  }
};
#endif  // __x86_64__

using MultiplyFn = void (*)(const uint8_t*, int64_t, int64_t, int64_t, const FloatRows&, int64_t, float*, int64_t,
                            int64_t, int64_t);

template <WeightStorage S>
MultiplyFn pick(KernelIsa isa) {
#if defined(__x86_64__)
  if (isa == KernelIsa::Avx512) return &multiply_with<Avx512Kernels, S, FloatRows>;
  if (isa == KernelIsa::Avx2) return &multiply_with<Avx2Kernels, S, FloatRows>;
#endif
  (void)isa;
  return &multiply_with<PortableKernels, S, FloatRows>;
}

}  // namespace

PackedMatrix::PackedMatrix(const float* w, int64_t out, int64_t in, int64_t stride_out, int64_t stride_in,
                           WeightStorage storage, BlockDot dot)
    : out_(out), in_(in), storage_(storage), dot_(block_quantized(storage) ? dot : BlockDot::Float) {
  if (out <= 0 || in <= 0) throw std::invalid_argument("PackedMatrix: empty matrix");
  if (block_quantized(storage) && in % kGgmlQuantBlock != 0)
    throw std::invalid_argument(std::string("PackedMatrix: ") + weight_storage_name(storage) +
                                " weights need rows of a multiple of 32 inputs, got " + std::to_string(in) +
                                " (choose float16 or float32 weights)");
  const size_t bytes = static_cast<size_t>(this->bytes());
  void* raw = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (raw == nullptr) throw std::bad_alloc();
  data_ = std::shared_ptr<void>(raw, [](void* p) { std::free(p); });
  auto* base = static_cast<uint8_t*>(raw);
  auto* f32 = static_cast<float*>(raw);
  auto* u16 = static_cast<uint16_t*>(raw);
  const int64_t panel_size = this->panel_size();
  // Panel p, input i, lane c <- W[16p + c][i]; lanes past `out` are zero.
  if (block_quantized(storage)) {
    // Each row's blocks quantized as ggml does (core/io/ggml_quant.h), then spread into the panel layout above.
    const bool q4 = storage == WeightStorage::Q4_0;
    const auto quantize = q4 ? quantize_q4_0 : quantize_q8_0;
    const auto dequantize = q4 ? dequantize_q4_0 : dequantize_q8_0;
    std::memset(base, 0, bytes);  // Q4_0 ORs nibbles in
    float row[kGgmlQuantBlock], back[kGgmlQuantBlock];
    uint8_t block[34];
    for (int64_t p = 0; p < panels(); ++p) {
      uint8_t* panel = base + p * panel_size;
      auto* scales = reinterpret_cast<float*>(panel + (q4 ? in * kPanel / 2 : in * kPanel));  // BlockDot::Float
      for (int64_t c = 0; c < kPanel; ++c) {
        const int64_t o = p * kPanel + c;
        for (int64_t b = 0; b < in / kGgmlQuantBlock; ++b) {
          for (int64_t j = 0; j < kGgmlQuantBlock; ++j)
            row[j] = o < out ? w[o * stride_out + (b * kGgmlQuantBlock + j) * stride_in] : 0.0f;
          quantize(row, kGgmlQuantBlock, block);
          dequantize(block, kGgmlQuantBlock, back);
          for (int64_t j = 0; j < kGgmlQuantBlock; ++j)
            if (back[j] != row[j]) exact_ = false;
          if (dot_ == BlockDot::Int8) {
            packed_int8::put_block(storage, panel, in, b, c, block);
            continue;
          }
          uint16_t d;
          std::memcpy(&d, block, 2);
          scales[b * kPanel + c] = half_to_float(d);
          for (int64_t j = 0; j < kGgmlQuantBlock; ++j) {
            const int64_t i = b * kGgmlQuantBlock + j;
            if (q4) {  // ggml's byte j holds values j and j + 16; here byte i / 2 holds inputs i & ~1 and i | 1
              const uint8_t v = j < 16 ? block[2 + j] & 15 : block[2 + j - 16] >> 4;
              panel[(i >> 1) * kPanel + c] |= static_cast<uint8_t>(v << ((i & 1) * 4));
            } else {
              panel[i * kPanel + c] = block[2 + j];
            }
          }
        }
      }
    }
    return;
  }
  for (int64_t p = 0; p < panels(); ++p) {
    for (int64_t i = 0; i < in; ++i) {
      for (int64_t c = 0; c < kPanel; ++c) {
        const int64_t o = p * kPanel + c;
        const float v = o < out ? w[o * stride_out + i * stride_in] : 0.0f;
        const int64_t at = (p * in + i) * kPanel + c;
        switch (storage) {
          case WeightStorage::Float32: f32[at] = v; break;
          case WeightStorage::Float16: u16[at] = float_to_half(v); break;
          case WeightStorage::BFloat16: u16[at] = float_to_bfloat16(v); break;
          case WeightStorage::Q8_0:
          case WeightStorage::Q4_0: break;  // above
        }
      }
    }
  }
}

int64_t PackedMatrix::panel_size() const {
  return dot_ == BlockDot::Int8 ? packed_int8::panel_bytes(storage_, in_) : panel_bytes(storage_, in_);
}

float PackedMatrix::at(int64_t o, int64_t i) const {
  const int64_t idx = ((o / kPanel) * in_ + i) * kPanel + o % kPanel;
  const auto* base = static_cast<const uint8_t*>(data_.get());
  if (dot_ == BlockDot::Int8)
    return packed_int8::value(storage_, base + (o / kPanel) * panel_size(), in_, i, o % kPanel);
  switch (storage_) {
    case WeightStorage::Q8_0:
      return block_value<WeightStorage::Q8_0>(base + (o / kPanel) * panel_bytes(storage_, in_), in_, i, o % kPanel);
    case WeightStorage::Q4_0:
      return block_value<WeightStorage::Q4_0>(base + (o / kPanel) * panel_bytes(storage_, in_), in_, i, o % kPanel);
    case WeightStorage::Float32: return load_scalar<WeightStorage::Float32>(base, idx);
    case WeightStorage::Float16: return load_scalar<WeightStorage::Float16>(base, idx);
    case WeightStorage::BFloat16: return load_scalar<WeightStorage::BFloat16>(base, idx);
  }
  return 0.0f;
}

namespace {
template <WeightStorage S>
void copy_row(const uint8_t* base, int64_t o, int64_t in, float* out) {
  constexpr int64_t P = PackedMatrix::kPanel;
  const int64_t first = (o / P) * in * P + o % P;  // element (o, 0); element (o, i) is P further per i
  for (int64_t i = 0; i < in; ++i) out[i] = load_scalar<S>(base, first + i * P);
}
}  // namespace

void PackedMatrix::row(int64_t o, float* out) const {
  const auto* base = static_cast<const uint8_t*>(data_.get());
  switch (storage_) {
    case WeightStorage::Q8_0:
    case WeightStorage::Q4_0:
      for (int64_t i = 0; i < in_; ++i) out[i] = at(o, i);
      return;
    case WeightStorage::Float32: return copy_row<WeightStorage::Float32>(base, o, in_, out);
    case WeightStorage::Float16: return copy_row<WeightStorage::Float16>(base, o, in_, out);
    case WeightStorage::BFloat16: return copy_row<WeightStorage::BFloat16>(base, o, in_, out);
  }
}

namespace {
void check_isa(KernelIsa isa) {
  if (static_cast<int>(isa) > static_cast<int>(best_kernel_isa()))
    throw std::invalid_argument(std::string("PackedMatrix::multiply: this CPU cannot run the ") +
                                kernel_isa_name(isa) + " kernel");
}
}  // namespace

void PackedMatrix::multiply(const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t panel_begin,
                            int64_t panel_end) const {
  multiply(x, ldx, n, y, ldy, panel_begin, panel_end, best_kernel_isa());
}

void PackedMatrix::multiply(const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t panel_begin,
                            int64_t panel_end, KernelIsa isa) const {
  if (n <= 0 || panel_begin >= panel_end) return;
  check_isa(isa);
  if (dot_ == BlockDot::Int8) {
    thread_local QuantizedRows quantized;
    quantize_rows(x, ldx, n, in_, quantized);
    multiply(quantized, y, ldy, panel_begin, panel_end, isa);
    return;
  }
  MultiplyFn fn = nullptr;
  switch (storage_) {
    case WeightStorage::Float32: fn = pick<WeightStorage::Float32>(isa); break;
    case WeightStorage::Float16: fn = pick<WeightStorage::Float16>(isa); break;
    case WeightStorage::BFloat16: fn = pick<WeightStorage::BFloat16>(isa); break;
    case WeightStorage::Q8_0: fn = pick<WeightStorage::Q8_0>(isa); break;
    case WeightStorage::Q4_0: fn = pick<WeightStorage::Q4_0>(isa); break;
  }
  fn(static_cast<const uint8_t*>(data_.get()), panel_size(), out_, in_, FloatRows{x, ldx}, n, y, ldy, panel_begin,
     panel_end);
}

void PackedMatrix::multiply(const QuantizedRows& x, float* y, int64_t ldy, int64_t panel_begin,
                            int64_t panel_end) const {
  multiply(x, y, ldy, panel_begin, panel_end, best_kernel_isa());
}

void PackedMatrix::multiply(const QuantizedRows& x, float* y, int64_t ldy, int64_t panel_begin, int64_t panel_end,
                            KernelIsa isa) const {
  if (dot_ != BlockDot::Int8)
    throw std::invalid_argument(std::string("PackedMatrix::multiply: quantized rows need int8 dot products, this "
                                            "matrix multiplies ") + weight_storage_name(storage_) + " weights in float");
  if (x.in != in_)
    throw std::invalid_argument("PackedMatrix::multiply: rows of " + std::to_string(x.in) + " values for a matrix of " +
                                std::to_string(in_) + " inputs");
  if (x.n <= 0 || panel_begin >= panel_end) return;
  check_isa(isa);
  packed_int8::multiply(storage_, packed_int8::int8_kernel_for(isa), static_cast<const uint8_t*>(data_.get()), out_,
                        in_, x, y, ldy, panel_begin, panel_end);
}

}  // namespace draftlab
