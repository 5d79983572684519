// PackedMatrix against a naive double-precision reference, for every storage type and every kernel this CPU can
// run (AVX-512, AVX2 and portable are all tested where the CPU has them); the row-independence contract (a row's
// result is bit-identical whatever else shares the call); and the float16 / bfloat16 conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/io/ggml_quant.h"
#include "core/io/gguf.h"
#include "core/ops/packed_matrix.h"
#include "packed_checks.h"

namespace draftlab {
namespace {

float stored_value(float v, WeightStorage s) {
  if (s == WeightStorage::Float16) return half_to_float(float_to_half(v));
  if (s == WeightStorage::BFloat16) return bfloat16_to_float(float_to_bfloat16(v));
  return v;
}

// W [out, in] (W[o][i] = w[o * so + i * si]) as `s` stores it: element by element, or for q8_0 / q4_0 each row's
// blocks of 32 quantized and dequantized by core/io/ggml_quant.h (itself tested against the definitions).
std::vector<float> stored_matrix(const std::vector<float>& w, int64_t out, int64_t in, int64_t so, int64_t si,
                                 WeightStorage s) {
  std::vector<float> r(w.size());
  for (int64_t o = 0; o < out; ++o) {
    if (s == WeightStorage::Q8_0 || s == WeightStorage::Q4_0) {
      const uint32_t type = s == WeightStorage::Q8_0 ? kGgmlQ8_0 : kGgmlQ4_0;
      for (int64_t b = 0; b < in; b += 32) {
        float block[32], back[32];
        uint8_t q[34];
        for (int64_t j = 0; j < 32; ++j) block[j] = w[o * so + (b + j) * si];
        quantize_blocks(type, block, 32, q);
        dequantize_blocks(type, q, 32, back);
        for (int64_t j = 0; j < 32; ++j) r[o * so + (b + j) * si] = back[j];
      }
    } else {
      for (int64_t i = 0; i < in; ++i) r[o * so + i * si] = stored_value(w[o * so + i * si], s);
    }
  }
  return r;
}

// Q8_0 and Q4_0 need whole blocks of 32 inputs.
bool fits(WeightStorage s, int64_t in) {
  return (s != WeightStorage::Q8_0 && s != WeightStorage::Q4_0) || in % 32 == 0;
}

struct Shape {
  int64_t n, out, in;
};

class PackedMatrixTest : public ::testing::TestWithParam<std::tuple<WeightStorage, KernelIsa>> {};

TEST_P(PackedMatrixTest, MatchesNaiveProductOnAwkwardShapes) {
  const auto [storage, isa] = GetParam();
  if (static_cast<int>(isa) > static_cast<int>(best_kernel_isa())) GTEST_SKIP() << "CPU lacks this ISA";
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Shape& s : {Shape{1, 16, 8}, Shape{1, 17, 5}, Shape{2, 300, 33}, Shape{3, 129, 64}, Shape{5, 48, 256},
                         Shape{8, 200, 17}, Shape{9, 31, 40}, Shape{17, 70, 24}, Shape{64, 65, 16}, Shape{70, 130, 9},
                         Shape{1, 33, 32}, Shape{2, 300, 96}, Shape{9, 31, 160}, Shape{64, 65, 32}}) {
    if (!fits(storage, s.in)) continue;
    SCOPED_TRACE("n=" + std::to_string(s.n) + " out=" + std::to_string(s.out) + " in=" + std::to_string(s.in));
    // W given column-major (stride_out 1), as LlamaWeights stores projections.
    std::vector<float> w(static_cast<size_t>(s.out * s.in));
    for (auto& v : w) v = dist(rng);
    const PackedMatrix m(w.data(), s.out, s.in, /*stride_out=*/1, /*stride_in=*/s.out, storage);
    const std::vector<float> stored = stored_matrix(w, s.out, s.in, 1, s.out, storage);
    const int64_t ldx = s.in + 3, ldy = s.out + 5;
    std::vector<float> x(static_cast<size_t>(s.n * ldx), std::nanf(""));  // padding is NaN: must not be read
    for (int64_t j = 0; j < s.n; ++j)
      for (int64_t i = 0; i < s.in; ++i) x[j * ldx + i] = dist(rng);
    std::vector<float> y(static_cast<size_t>(s.n * ldy), -7.0f);
    // Two calls over a split of the panels, as threads do.
    const int64_t mid = m.panels() / 2;
    m.multiply(x.data(), ldx, s.n, y.data(), ldy, 0, mid, isa);
    m.multiply(x.data(), ldx, s.n, y.data(), ldy, mid, m.panels(), isa);
    for (int64_t j = 0; j < s.n; ++j) {
      for (int64_t o = 0; o < ldy; ++o) {
        const float got = y[j * ldy + o];
        if (o >= s.out) {
          ASSERT_EQ(got, -7.0f) << "wrote past the output at row " << j << " column " << o;
          continue;
        }
        double want = 0.0, magnitude = 0.0;
        for (int64_t i = 0; i < s.in; ++i) {
          const double term = static_cast<double>(x[j * ldx + i]) * stored[i * s.out + o];
          want += term;
          magnitude += std::fabs(term);
        }
        ASSERT_NEAR(got, want, 1e-6 * magnitude + 1e-30) << "row " << j << " column " << o;
      }
    }
  }
}

// y[j] computed with n rows equals y[j] computed alone: tree verification repeats vanilla's arithmetic.
TEST_P(PackedMatrixTest, EachRowIsBitIdenticalToTheRowAlone) {
  const auto [storage, isa] = GetParam();
  if (static_cast<int>(isa) > static_cast<int>(best_kernel_isa())) GTEST_SKIP() << "CPU lacks this ISA";
  const std::vector<float> w = testing::random_matrix(200, 96, 5);
  testing::expect_rows_independent(PackedMatrix(w.data(), 200, 96, 96, 1, storage), isa);
}

INSTANTIATE_TEST_SUITE_P(
    StorageAndIsa, PackedMatrixTest,
    ::testing::Combine(::testing::Values(WeightStorage::Float32, WeightStorage::Float16, WeightStorage::BFloat16,
                                         WeightStorage::Q8_0, WeightStorage::Q4_0),
                       ::testing::Values(KernelIsa::Portable, KernelIsa::Avx2, KernelIsa::Avx512)),
    [](const auto& info) {
      return std::string(weight_storage_name(std::get<0>(info.param))) + "_" +
             kernel_isa_name(std::get<1>(info.param));
    });

// The two FMA paths run the same per-lane FMA chain: identical bits.
TEST(PackedMatrix, Avx2AndAvx512GiveIdenticalBits) {
  if (best_kernel_isa() != KernelIsa::Avx512) GTEST_SKIP() << "needs an AVX-512 CPU";
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t out = 333, in = 77, n = 11;
  std::vector<float> w(static_cast<size_t>(out * in)), x(static_cast<size_t>(n * in));
  for (auto& v : w) v = dist(rng);
  for (auto& v : x) v = dist(rng);
  for (WeightStorage s : {WeightStorage::Float32, WeightStorage::Float16, WeightStorage::BFloat16}) {
    const PackedMatrix m(w.data(), out, in, in, 1, s);
    std::vector<float> a(static_cast<size_t>(n * out)), b(a.size());
    m.multiply(x.data(), in, n, a.data(), out, 0, m.panels(), KernelIsa::Avx2);
    m.multiply(x.data(), in, n, b.data(), out, 0, m.panels(), KernelIsa::Avx512);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << weight_storage_name(s);
  }
}

// A weight is d * q (Q4_0: d * (q - 8)), exact in float32: a block-quantized matrix gives the very bits of the
// float32 matrix of its dequantized values, on every kernel; its values, rows and exactness flag follow.
class BlockQuantizedTest : public ::testing::TestWithParam<WeightStorage> {};

TEST_P(BlockQuantizedTest, MultipliesBitForBitAsItsDequantizedFloat32Matrix) {
  const WeightStorage storage = GetParam();
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  const int64_t out = 150, in = 224, n = 13;
  std::vector<float> w(static_cast<size_t>(out * in)), x(static_cast<size_t>(n * in));
  for (auto& v : w) v = dist(rng);
  for (auto& v : x) v = dist(rng) * 20.0f;
  const PackedMatrix quantized(w.data(), out, in, in, 1, storage);
  EXPECT_FALSE(quantized.exact());  // random floats are not on the grid
  const std::vector<float> dq = stored_matrix(w, out, in, in, 1, storage);
  const PackedMatrix f32(dq.data(), out, in, in, 1, WeightStorage::Float32);
  // Packing the dequantized values again reproduces the blocks (what loading a quantized file relies on).
  const PackedMatrix again(dq.data(), out, in, in, 1, storage);
  EXPECT_TRUE(again.exact());
  EXPECT_LT(quantized.bytes(), f32.bytes() / (storage == WeightStorage::Q4_0 ? 6 : 3));  // 1 or 1/2 byte + 4 per 32
  std::vector<float> r(static_cast<size_t>(in));
  for (int64_t o : {int64_t{0}, int64_t{17}, out - 1}) {
    quantized.row(o, r.data());
    for (int64_t i = 0; i < in; ++i) {
      ASSERT_EQ(r[i], dq[o * in + i]) << o << " " << i;
      ASSERT_EQ(quantized.at(o, i), dq[o * in + i]) << o << " " << i;
    }
  }
  for (KernelIsa isa : {KernelIsa::Portable, KernelIsa::Avx2, KernelIsa::Avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(best_kernel_isa())) continue;
    for (int64_t rows : {int64_t{1}, int64_t{4}, n}) {
      std::vector<float> a(static_cast<size_t>(rows * out)), b(a.size());
      quantized.multiply(x.data(), in, rows, a.data(), out, 0, quantized.panels(), isa);
      f32.multiply(x.data(), in, rows, b.data(), out, 0, f32.panels(), isa);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << kernel_isa_name(isa) << " n=" << rows;
    }
  }
  EXPECT_THROW(PackedMatrix(w.data(), out, 40, 40, 1, storage), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Q8_0AndQ4_0, BlockQuantizedTest, ::testing::Values(WeightStorage::Q8_0, WeightStorage::Q4_0),
                         [](const auto& info) { return std::string(weight_storage_name(info.param)); });

TEST(PackedMatrix, StoresValuesAsTheCheckpointWould) {
  const float w[] = {1.0f, -2.5f, 0.1f, 65504.0f, 1e-8f, 3.14159f};
  const PackedMatrix h(w, 6, 1, 1, 1, WeightStorage::Float16);
  const PackedMatrix b(w, 6, 1, 1, 1, WeightStorage::BFloat16);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(h.at(i, 0), half_to_float(float_to_half(w[i])));
    EXPECT_EQ(b.at(i, 0), bfloat16_to_float(float_to_bfloat16(w[i])));
  }
  EXPECT_EQ(h.bytes(), 16 * 1 * 2);  // one panel of 16 rows (padded), 2 bytes each
}

// Every finite half and bfloat16 survives float32 and back; known roundings (ties to even) of float32 values.
TEST(HalfConversions, RoundTripAndRoundToNearestEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto u = static_cast<uint16_t>(h);
    if ((u & 0x7c00u) == 0x7c00u && (u & 0x3ffu)) continue;  // NaN payloads
    ASSERT_EQ(float_to_half(half_to_float(u)), u) << h;
    if ((u & 0x7f80u) == 0x7f80u && (u & 0x7fu)) continue;
    ASSERT_EQ(float_to_bfloat16(bfloat16_to_float(u)), u) << h;
  }
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);        // halfway between 1 and next: to even (1)
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048), 0x3c02);        // halfway, odd below: up
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);                  // rounds past the largest half: inf
  EXPECT_EQ(float_to_half(5.9604645e-8f), 0x0001);             // smallest subnormal
  EXPECT_EQ(float_to_half(2.9802322e-8f), 0x0000);             // half of it: ties to even (0)
  EXPECT_EQ(float_to_bfloat16(1.00390625f), 0x3f80);           // 1 + 2^-8: tie, to even
  EXPECT_EQ(float_to_bfloat16(1.01171875f), 0x3f82);           // 1 + 3 * 2^-8: tie, up to even
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
}

}  // namespace
}  // namespace draftlab
