// PackedMatrix kernels. See packed_matrix.h for the layout and the row-independence contract.
//
// Tiles: MR rows of x by NP panels (NP * 16 output columns). The MR x NP accumulators live in registers for the
// whole input; per input index the tile loads NP panel vectors (widening half precision) and issues MR * NP FMAs.
// MR and NP are chosen so the accumulators plus the loaded vectors fit the register file and there are always at
// least 8 independent FMA chains (two FMA pipes, four cycles of latency):
//   AVX-512 (32 zmm): MR 1..2 -> NP 8, 3..4 -> 6, 5..6 -> 4, 7..8 -> 3.      rows are cut into chunks of <= 8
//   AVX2    (16 ymm, a panel is 2 ymm): MR 1 -> NP 4, 2 -> 3, 3 -> 2, 4 -> 1. chunks of <= 4
// n rows are cut into balanced chunks (n = 10 -> 5 + 5). Loop order: panel groups outer, row chunks inner, so a
// group's panels (at most a few hundred KB) stay in L2 while every chunk reads them: memory sees each weight once.
// Each panel is one sequential stream; software prefetch runs a fixed distance ahead in each.
#include "core/ops/packed_matrix.h"
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

// ---- conversions -------------------------------------------------------------------------------------------------

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return static_cast<uint16_t>(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));  // NaN / inf
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (x < 0x38800000u) {  // below the smallest normal half: subnormal or zero, rounded to nearest even
    if (x < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t mant = (x & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(x >> 23);  // 14 .. 24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((x >> 13) - (112u << 10));
  const uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: still correct
  return static_cast<uint16_t>(sign | h);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      x = sign | ((112u - e) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16_to_float(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

const char* weight_storage_name(WeightStorage s) {
  switch (s) {
    case WeightStorage::Float32: return "float32";
    case WeightStorage::Float16: return "float16";
    case WeightStorage::BFloat16: return "bfloat16";
  }
  return "?";
}

int64_t weight_storage_bytes(WeightStorage s) { return s == WeightStorage::Float32 ? 4 : 2; }

const char* kernel_isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::Portable: return "portable";
    case KernelIsa::Avx2: return "avx2";
    case KernelIsa::Avx512: return "avx512";
  }
  return "?";
}

KernelIsa best_kernel_isa() {
  static const KernelIsa isa = [] {
    KernelIsa best = KernelIsa::Portable;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
      best = KernelIsa::Avx2;
    if (best == KernelIsa::Avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
      best = KernelIsa::Avx512;
#endif
    if (const char* cap = std::getenv("DRAFTLAB_ISA")) {
      const std::string c = cap;
      if (c == "portable") best = KernelIsa::Portable;
      else if (c == "avx2" && best == KernelIsa::Avx512) best = KernelIsa::Avx2;
    }
    return best;
  }();
  return isa;
}

namespace {


constexpr int64_t P = PackedMatrix::kPanel;
constexpr int64_t kPrefetchBytes = 768;  // how far ahead in each panel's stream

// Balanced row chunks: n rows into ceil(n / max_mr) chunks whose sizes differ by at most one.
struct RowChunks {
  int64_t count, base, extra;  // chunk c has base + (c < extra) rows
  RowChunks(int64_t n, int64_t max_mr) : count((n + max_mr - 1) / max_mr), base(n / count), extra(n % count) {}
  int64_t rows(int64_t c) const { return base + (c < extra ? 1 : 0); }
  int64_t largest() const { return base + (extra > 0 ? 1 : 0); }
};

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
    for (int64_t c = 0; c < P; ++c) w[c] = load_scalar<S>(panel, i * P + c);
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
  template <WeightStorage S>
  static void tile(int64_t mr, int /*np = 1*/, const float* x, int64_t ldx, const uint8_t* panels,
                   int64_t /*panel_bytes*/, int64_t k, float* y, int64_t ldy, int64_t cols) {
    portable_tile<S>(x, ldx, mr, panels, k, y, ldy, cols);
  }
};

// ---- AVX2 + FMA + F16C -------------------------------------------------------------------------------------------
#if defined(__x86_64__)
#define DRAFTLAB_AVX2 __attribute__((target("avx2,fma,f16c")))

template <WeightStorage S>
DRAFTLAB_AVX2 inline __m256 load8(const uint8_t* p) {
  if constexpr (S == WeightStorage::Float32) {
    return _mm256_load_ps(reinterpret_cast<const float*>(p));
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
                             float* y, int64_t ldy, int64_t cols) {
  constexpr int64_t B = S == WeightStorage::Float32 ? 4 : 2;
  __m256 acc[MR][NP][2];
  DRAFTLAB_UNROLL
  for (int r = 0; r < MR; ++r) {
    DRAFTLAB_UNROLL
    for (int q = 0; q < NP; ++q) acc[r][q][0] = acc[r][q][1] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < k; ++i) {
    DRAFTLAB_UNROLL
    for (int q = 0; q < NP; ++q) {
      const uint8_t* wp = panels + q * panel_bytes + i * P * B;
      _mm_prefetch(reinterpret_cast<const char*>(wp + kPrefetchBytes), _MM_HINT_T0);
      const __m256 w0 = load8<S>(wp), w1 = load8<S>(wp + 8 * B);
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
    alignas(32) float tmp[NP * P];
    for (int r = 0; r < MR; ++r) {
      for (int q = 0; q < NP; ++q) {
        _mm256_store_ps(tmp + q * P, acc[r][q][0]);
        _mm256_store_ps(tmp + q * P + 8, acc[r][q][1]);
      }
      std::memcpy(y + r * ldy, tmp, static_cast<size_t>(cols) * sizeof(float));
    }
  }
}

constexpr int avx2_panels_for(int mr) { return mr == 1 ? 4 : mr == 2 ? 3 : mr == 3 ? 2 : 1; }

template <WeightStorage S, int MR>
DRAFTLAB_AVX2 void avx2_tile_np(int np, const float* x, int64_t ldx, const uint8_t* panels, int64_t panel_bytes,
                                int64_t k, float* y, int64_t ldy, int64_t cols) {
  switch (np) {
    case 1: avx2_tile<S, MR, 1>(x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
    case 2: if constexpr (avx2_panels_for(MR) >= 2) avx2_tile<S, MR, 2>(x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
    case 3: if constexpr (avx2_panels_for(MR) >= 3) avx2_tile<S, MR, 3>(x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
    default: if constexpr (avx2_panels_for(MR) >= 4) avx2_tile<S, MR, 4>(x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
  }
}

struct Avx2Kernels {
  static constexpr int64_t kMaxRows = 4;
  static constexpr int panels_for(int mr) { return avx2_panels_for(mr); }
  template <WeightStorage S>
  static void tile(int64_t mr, int np, const float* x, int64_t ldx, const uint8_t* panels, int64_t panel_bytes,
                   int64_t k, float* y, int64_t ldy, int64_t cols) {
    switch (mr) {
      case 1: avx2_tile_np<S, 1>(np, x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
      case 2: avx2_tile_np<S, 2>(np, x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
      case 3: avx2_tile_np<S, 3>(np, x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
      default: avx2_tile_np<S, 4>(np, x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
    }
  }
};

// ---- AVX-512 -----------------------------------------------------------------------------------------------------
#define DRAFTLAB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

template <WeightStorage S>
DRAFTLAB_AVX512 inline __m512 load16(const uint8_t* p) {
  if constexpr (S == WeightStorage::Float32) {
    return _mm512_load_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (S == WeightStorage::Float16) {
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
  } else {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
}

template <WeightStorage S, int MR, int NP>
DRAFTLAB_AVX512 void avx512_tile(const float* x, int64_t ldx, const uint8_t* panels, int64_t panel_bytes, int64_t k,
                                 float* y, int64_t ldy, int64_t cols) {
  constexpr int64_t B = S == WeightStorage::Float32 ? 4 : 2;
  __m512 acc[MR][NP];
  DRAFTLAB_UNROLL
  for (int r = 0; r < MR; ++r) {
    DRAFTLAB_UNROLL
    for (int q = 0; q < NP; ++q) acc[r][q] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < k; ++i) {
    __m512 w[NP];
    DRAFTLAB_UNROLL
    for (int q = 0; q < NP; ++q) {
      const uint8_t* wp = panels + q * panel_bytes + i * P * B;
      _mm_prefetch(reinterpret_cast<const char*>(wp + kPrefetchBytes), _MM_HINT_T0);
      w[q] = load16<S>(wp);
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

template <WeightStorage S, int MR>
DRAFTLAB_AVX512 void avx512_tile_np(int np, const float* x, int64_t ldx, const uint8_t* panels, int64_t panel_bytes,
                                    int64_t k, float* y, int64_t ldy, int64_t cols) {
  constexpr int G = avx512_panels_for(MR);
#define DRAFTLAB_TILE_CASE(N) \
  case N: if constexpr (G >= N) avx512_tile<S, MR, N>(x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
  switch (np) {
    DRAFTLAB_TILE_CASE(1)
    DRAFTLAB_TILE_CASE(2)
    DRAFTLAB_TILE_CASE(3)
    DRAFTLAB_TILE_CASE(4)
    DRAFTLAB_TILE_CASE(5)
    DRAFTLAB_TILE_CASE(6)
    DRAFTLAB_TILE_CASE(7)
    DRAFTLAB_TILE_CASE(8)
    default: break;
  }
#undef DRAFTLAB_TILE_CASE
}

struct Avx512Kernels {
  static constexpr int64_t kMaxRows = 8;
  static constexpr int panels_for(int mr) { return avx512_panels_for(mr); }
  template <WeightStorage S>
  static void tile(int64_t mr, int np, const float* x, int64_t ldx, const uint8_t* panels, int64_t panel_bytes,
                   int64_t k, float* y, int64_t ldy, int64_t cols) {
    switch (mr) {
      case 1: avx512_tile_np<S, 1>(np, x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
      case 2: avx512_tile_np<S, 2>(np, x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
      case 3: avx512_tile_np<S, 3>(np, x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
      case 4: avx512_tile_np<S, 4>(np, x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
      case 5: avx512_tile_np<S, 5>(np, x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
      case 6: avx512_tile_np<S, 6>(np, x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
      case 7: avx512_tile_np<S, 7>(np, x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
      default: avx512_tile_np<S, 8>(np, x, ldx, panels, panel_bytes, k, y, ldy, cols); break;
    }
  }
};
#endif  // __x86_64__

// The loop every path shares: panel groups outer (as many panels as the largest row chunk's tile takes), row
// chunks inner, so a group's panels stay in cache while every chunk reads them.
template <class Kernels, WeightStorage S>
void multiply_with(const uint8_t* data, int64_t out, int64_t k, const float* x, int64_t ldx, int64_t n, float* y,
                   int64_t ldy, int64_t p0, int64_t p1) {
  const RowChunks chunks(n, Kernels::kMaxRows);
  const int group = Kernels::panels_for(static_cast<int>(chunks.largest()));
  const int64_t panel_bytes = k * P * weight_storage_bytes(S);
  for (int64_t p = p0; p < p1; p += group) {
    const int np = static_cast<int>(std::min<int64_t>(group, p1 - p));
    const int64_t cols = std::min(np * P, out - p * P);
    int64_t r0 = 0;
    for (int64_t c = 0; c < chunks.count; ++c) {
      const int64_t mr = chunks.rows(c);
      Kernels::template tile<S>(mr, np, x + r0 * ldx, ldx, data + p * panel_bytes, panel_bytes, k,
                                y + r0 * ldy + p * P, ldy, cols);
      r0 += mr;
    }
  }
}

using MultiplyFn = void (*)(const uint8_t*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t,
                            int64_t, int64_t);

template <WeightStorage S>
MultiplyFn pick(KernelIsa isa) {
#if defined(__x86_64__)
  if (isa == KernelIsa::Avx512) return &multiply_with<Avx512Kernels, S>;
  if (isa == KernelIsa::Avx2) return &multiply_with<Avx2Kernels, S>;
#endif
  (void)isa;
  return &multiply_with<PortableKernels, S>;
}

}  // namespace

PackedMatrix::PackedMatrix(const float* w, int64_t out, int64_t in, int64_t stride_out, int64_t stride_in,
                           WeightStorage storage)
    : out_(out), in_(in), storage_(storage) {
  if (out <= 0 || in <= 0) throw std::invalid_argument("PackedMatrix: empty matrix");
  const size_t bytes = static_cast<size_t>(this->bytes());
  void* raw = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (raw == nullptr) throw std::bad_alloc();
  data_ = std::shared_ptr<void>(raw, [](void* p) { std::free(p); });
  auto* f32 = static_cast<float*>(raw);
  auto* u16 = static_cast<uint16_t*>(raw);
  // Panel p, input i, lane c <- W[16p + c][i]; lanes past `out` are zero.
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
        }
      }
    }
  }
}

float PackedMatrix::at(int64_t o, int64_t i) const {
  const int64_t idx = ((o / kPanel) * in_ + i) * kPanel + o % kPanel;
  const auto* base = static_cast<const uint8_t*>(data_.get());
  switch (storage_) {
    case WeightStorage::Float32: return load_scalar<WeightStorage::Float32>(base, idx);
    case WeightStorage::Float16: return load_scalar<WeightStorage::Float16>(base, idx);
    case WeightStorage::BFloat16: return load_scalar<WeightStorage::BFloat16>(base, idx);
  }
  return 0.0f;
}

void PackedMatrix::multiply(const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t panel_begin,
                            int64_t panel_end) const {
  multiply(x, ldx, n, y, ldy, panel_begin, panel_end, best_kernel_isa());
}

void PackedMatrix::multiply(const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t panel_begin,
                            int64_t panel_end, KernelIsa isa) const {
  if (n <= 0 || panel_begin >= panel_end) return;
  if (static_cast<int>(isa) > static_cast<int>(best_kernel_isa()))
    throw std::invalid_argument(std::string("PackedMatrix::multiply: this CPU cannot run the ") +
                                kernel_isa_name(isa) + " kernel");
  MultiplyFn fn = nullptr;
  switch (storage_) {
    case WeightStorage::Float32: fn = pick<WeightStorage::Float32>(isa); break;
    case WeightStorage::Float16: fn = pick<WeightStorage::Float16>(isa); break;
    case WeightStorage::BFloat16: fn = pick<WeightStorage::BFloat16>(isa); break;
  }
  fn(static_cast<const uint8_t*>(data_.get()), out_, in_, x, ldx, n, y, ldy, panel_begin, panel_end);
}

}  // namespace draftlab
