// BlockDot::Int8 (integer dot products over q8_0 / q4_0 panels) against a naive implementation of its definition,
// written from ggml's block formats alone: each row of x quantized by ggml's reference Q8_0 quantizer, the
// weights' blocks by ggml's Q8_0 / Q4_0 quantizers, s = sum of integer products per block, y = fma(s, d_w * d_x, y)
// over the blocks in order. Every kernel this CPU runs must give exactly those bits (AVX512-VNNI, AVX2 maddubs,
// portable), for any row count and any split of the panels (row independence: what lossless verification needs),
// and stay within the activation rounding bound of the float product.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/io/ggml_quant.h"
#include "core/io/gguf.h"
#include "core/ops/packed_int8.h"
#include "core/ops/packed_matrix.h"
#include "packed_checks.h"

namespace draftlab {
namespace {

struct Block {
  float d;
  int q[32];  // signed values (Q4_0: q - 8)
};

Block ggml_block(WeightStorage s, const float* x) {
  uint8_t bytes[34];
  const uint32_t type = s == WeightStorage::Q8_0 ? kGgmlQ8_0 : kGgmlQ4_0;
  quantize_blocks(type, x, 32, bytes);
  Block b;
  uint16_t h;
  std::memcpy(&h, bytes, 2);
  b.d = half_to_float(h);
  for (int j = 0; j < 32; ++j)
    b.q[j] = s == WeightStorage::Q8_0 ? static_cast<int8_t>(bytes[2 + j])
                                      : (j < 16 ? bytes[2 + j] & 15 : bytes[2 + j - 16] >> 4) - 8;
  return b;
}

// y[j][o] by the definition. W row-major [out, in].
std::vector<float> naive_int8_product(WeightStorage s, const std::vector<float>& w, int64_t out, int64_t in,
                                      const std::vector<float>& x, int64_t ldx, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n * out));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t o = 0; o < out; ++o) {
      float acc = 0.0f;
      for (int64_t b = 0; b < in / 32; ++b) {
        const Block xb = ggml_block(WeightStorage::Q8_0, x.data() + j * ldx + b * 32);
        const Block wb = ggml_block(s, w.data() + o * in + b * 32);
        int64_t sum = 0;
        for (int t = 0; t < 32; ++t) sum += static_cast<int64_t>(xb.q[t]) * wb.q[t];
        acc = std::fmaf(static_cast<float>(sum), wb.d * xb.d, acc);
      }
      y[j * out + o] = acc;
    }
  }
  return y;
}

bool runs(KernelIsa isa) { return static_cast<int>(isa) <= static_cast<int>(best_kernel_isa()); }

class Int8DotTest : public ::testing::TestWithParam<std::tuple<WeightStorage, KernelIsa>> {};

TEST_P(Int8DotTest, GivesTheDefinitionsBitsOnAwkwardShapes) {
  const auto [storage, isa] = GetParam();
  if (!runs(isa)) GTEST_SKIP() << "CPU lacks this ISA";
  std::mt19937 rng(13);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  struct Shape {
    int64_t n, out, in;
  };
  for (const Shape& s : {Shape{1, 16, 32}, Shape{1, 17, 64}, Shape{2, 300, 96}, Shape{3, 129, 32}, Shape{5, 48, 256},
                         Shape{8, 200, 64}, Shape{9, 31, 160}, Shape{17, 70, 32}, Shape{64, 65, 64},
                         Shape{70, 130, 96}}) {
    SCOPED_TRACE("n=" + std::to_string(s.n) + " out=" + std::to_string(s.out) + " in=" + std::to_string(s.in));
    std::vector<float> w(static_cast<size_t>(s.out * s.in));
    for (auto& v : w) v = dist(rng) * 0.05f;
    w[3] = 0.0f;  // a zero block somewhere: d = 0
    for (int64_t i = 0; i < 32 && s.out > 1; ++i) w[s.in + i] = 0.0f;
    const PackedMatrix m(w.data(), s.out, s.in, s.in, 1, storage, BlockDot::Int8);
    ASSERT_EQ(m.dot(), BlockDot::Int8);
    const int64_t ldx = s.in + 3, ldy = s.out + 5;
    std::vector<float> x(static_cast<size_t>(s.n * ldx), std::nanf(""));  // padding is NaN: must not be read
    for (int64_t j = 0; j < s.n; ++j)
      for (int64_t i = 0; i < s.in; ++i) x[j * ldx + i] = dist(rng) * (j % 3 == 0 ? 30.0f : 1.0f);
    for (int64_t i = 0; i < 32; ++i) x[i] = 0.0f;  // a zero activation block
    const std::vector<float> want = naive_int8_product(storage, w, s.out, s.in, x, ldx, s.n);
    std::vector<float> y(static_cast<size_t>(s.n * ldy), -7.0f);
    const int64_t mid = m.panels() / 2;  // two calls over a split of the panels, as threads do
    m.multiply(x.data(), ldx, s.n, y.data(), ldy, 0, mid, isa);
    m.multiply(x.data(), ldx, s.n, y.data(), ldy, mid, m.panels(), isa);
    for (int64_t j = 0; j < s.n; ++j)
      for (int64_t o = 0; o < ldy; ++o) {
        if (o >= s.out) {
          ASSERT_EQ(y[j * ldy + o], -7.0f) << "wrote past the output at row " << j << " column " << o;
          continue;
        }
        ASSERT_EQ(y[j * ldy + o], want[j * s.out + o]) << "row " << j << " column " << o;
      }
  }
}

// The same product from rows quantized once (what the native decoder does before its threads start).
TEST_P(Int8DotTest, PreQuantizedRowsGiveTheSameBits) {
  const auto [storage, isa] = GetParam();
  if (!runs(isa)) GTEST_SKIP() << "CPU lacks this ISA";
  std::mt19937 rng(17);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t out = 90, in = 128, n = 11;
  std::vector<float> w(static_cast<size_t>(out * in)), x(static_cast<size_t>(n * in));
  for (auto& v : w) v = dist(rng);
  for (auto& v : x) v = dist(rng);
  const PackedMatrix m(w.data(), out, in, in, 1, storage, BlockDot::Int8);
  QuantizedRows q;
  quantize_rows(x.data(), in, n, in, q);
  std::vector<float> a(static_cast<size_t>(n * out)), b(a.size());
  m.multiply(x.data(), in, n, a.data(), out, 0, m.panels(), isa);
  m.multiply(q, b.data(), out, 0, m.panels(), isa);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

// y[j] computed with n rows equals y[j] computed alone.
TEST_P(Int8DotTest, EachRowIsBitIdenticalToTheRowAlone) {
  const auto [storage, isa] = GetParam();
  if (!runs(isa)) GTEST_SKIP() << "CPU lacks this ISA";
  const std::vector<float> w = testing::random_matrix(200, 96, 5);
  testing::expect_rows_independent(PackedMatrix(w.data(), 200, 96, 96, 1, storage, BlockDot::Int8), isa);
}

// Independently of the integer definition: the result is the dequantized matrix's float product up to the
// activations' rounding (each x within d_x / 2 of d_x * q_x) and float32 summation.
TEST_P(Int8DotTest, StaysWithinTheActivationRoundingOfTheFloatProduct) {
  const auto [storage, isa] = GetParam();
  if (!runs(isa)) GTEST_SKIP() << "CPU lacks this ISA";
  std::mt19937 rng(23);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t out = 64, in = 256, n = 6;
  std::vector<float> w(static_cast<size_t>(out * in)), x(static_cast<size_t>(n * in));
  for (auto& v : w) v = dist(rng) * 0.05f;
  for (auto& v : x) v = dist(rng);
  const PackedMatrix m(w.data(), out, in, in, 1, storage, BlockDot::Int8);
  std::vector<float> y(static_cast<size_t>(n * out));
  m.multiply(x.data(), in, n, y.data(), out, 0, m.panels(), isa);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t o = 0; o < out; ++o) {
      double exact = 0.0, bound = 0.0, magnitude = 0.0;
      for (int64_t b = 0; b < in / 32; ++b) {
        float amax = 0.0f;
        for (int64_t t = 0; t < 32; ++t) amax = std::max(amax, std::fabs(x[j * in + b * 32 + t]));
        const double half_step = amax / 127.0 / 2.0 * 1.001;  // d_x / 2 (d_x rounded to float16: 0.1 %)
        for (int64_t t = 0; t < 32; ++t) {
          const int64_t i = b * 32 + t;
          const double wv = m.at(o, i);
          exact += wv * x[j * in + i];
          bound += std::fabs(wv) * half_step;
          magnitude += std::fabs(wv * x[j * in + i]);
        }
      }
      ASSERT_NEAR(y[j * out + o], exact, bound + 1e-5 * magnitude) << "row " << j << " column " << o;
    }
}

INSTANTIATE_TEST_SUITE_P(StorageAndIsa, Int8DotTest,
                         ::testing::Combine(::testing::Values(WeightStorage::Q8_0, WeightStorage::Q4_0),
                                            ::testing::Values(KernelIsa::Portable, KernelIsa::Avx2, KernelIsa::Avx512)),
                         [](const auto& info) {
                           return std::string(weight_storage_name(std::get<0>(info.param))) + "_" +
                                  kernel_isa_name(std::get<1>(info.param));
                         });

// The Int8 layout holds the same weights as the Float one, in about ggml's bytes (1 + 2/32 or 1/2 + 2/32 per
// weight, panels padded to 64 bytes), and refuses what it cannot multiply.
TEST(Int8Dot, HoldsTheSameWeightsInGgmlsBytes) {
  std::mt19937 rng(29);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  const int64_t out = 40, in = 96;
  std::vector<float> w(static_cast<size_t>(out * in));
  for (auto& v : w) v = dist(rng);
  for (WeightStorage s : {WeightStorage::Q8_0, WeightStorage::Q4_0}) {
    const PackedMatrix f(w.data(), out, in, in, 1, s, BlockDot::Float);
    const PackedMatrix i8(w.data(), out, in, in, 1, s, BlockDot::Int8);
    std::vector<float> a(static_cast<size_t>(in)), b(a.size());
    for (int64_t o = 0; o < out; ++o) {
      f.row(o, a.data());
      i8.row(o, b.data());
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << weight_storage_name(s) << " row " << o;
    }
    EXPECT_EQ(f.exact(), i8.exact());
    const double per_weight = s == WeightStorage::Q8_0 ? 34.0 / 32 : 18.0 / 32;
    EXPECT_LE(i8.bytes(), i8.panels() * (16 * in * per_weight + 63));
    QuantizedRows q;
    std::vector<float> x(static_cast<size_t>(in), 0.5f), y(static_cast<size_t>(out));
    quantize_rows(x.data(), in, 1, in, q);
    EXPECT_THROW(f.multiply(q, y.data(), out, 0, f.panels()), std::invalid_argument);  // a Float-dot matrix
    quantize_rows(x.data(), in, 1, 64, q);
    EXPECT_THROW(i8.multiply(q, y.data(), out, 0, i8.panels()), std::invalid_argument);  // rows of the wrong width
  }
  QuantizedRows unused;
  EXPECT_THROW(quantize_rows(w.data(), 40, 1, 40, unused), std::invalid_argument);  // not whole blocks
  // Float storages have no integer form: the choice is ignored.
  EXPECT_EQ(PackedMatrix(w.data(), out, in, in, 1, WeightStorage::Float16, BlockDot::Int8).dot(), BlockDot::Float);
}

// quantize_rows is ggml's reference quantizer, block by block, with the sums the unsigned-operand kernels need.
TEST(Int8Dot, QuantizedRowsAreGgmlsQ8_0Blocks) {
  std::mt19937 rng(31);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  const int64_t n = 3, in = 64, ldx = 70;
  std::vector<float> x(static_cast<size_t>(n * ldx));
  for (auto& v : x) v = dist(rng);
  QuantizedRows q;
  quantize_rows(x.data(), ldx, n, in, q);
  ASSERT_EQ(q.n, n);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t b = 0; b < 2; ++b) {
      const Block want = ggml_block(WeightStorage::Q8_0, x.data() + r * ldx + b * 32);
      EXPECT_EQ(q.scale[r * 2 + b], want.d);
      int sum = 0;
      for (int t = 0; t < 32; ++t) {
        ASSERT_EQ(q.q[r * in + b * 32 + t], want.q[t]);
        sum += want.q[t];
      }
      EXPECT_EQ(q.sum[r * 2 + b], sum);
    }
}

TEST(Int8Dot, NamesTheInstructionItMultipliesWith) {
  using packed_int8::Int8Kernel;
  EXPECT_STREQ(int8_dot_instruction(KernelIsa::Portable), "scalar");
  const std::string avx2 = int8_dot_instruction(KernelIsa::Avx2);
  EXPECT_EQ(avx2, packed_int8::int8_kernel_runs(Int8Kernel::AvxVnni256) ? "vpdpbusd ymm (AVX-VNNI)" : "vpmaddubsw");
  if (best_kernel_isa() == KernelIsa::Avx512 && packed_int8::int8_kernel_runs(Int8Kernel::Avx512Vnni512))
    EXPECT_STREQ(int8_dot_instruction(KernelIsa::Avx512), "vpdpbusd zmm");
}

// Every kernel family this CPU runs, called directly on panels the test lays out itself from ggml's blocks with
// put_block (the layout's own writer): the definition's bits, whatever the rows and the panel split. This is where
// the AVX-VNNI code is checked on a CPU without AVX-VNNI: its AVX512-VNNI encoding is the same code.
std::string kernel_label(packed_int8::Int8Kernel k) {
  const char* names[] = {"portable", "maddubs256", "avx_vnni256", "avx512_vnni256", "avx512_vnni512"};
  return names[static_cast<int>(k)];
}

class Int8KernelTest : public ::testing::TestWithParam<std::tuple<WeightStorage, packed_int8::Int8Kernel>> {};

TEST_P(Int8KernelTest, GivesTheDefinitionsBits) {
  const auto [storage, kernel] = GetParam();
  if (!packed_int8::int8_kernel_runs(kernel)) GTEST_SKIP() << "CPU lacks " << packed_int8::int8_kernel_name(kernel);
  std::mt19937 rng(37);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const auto& [n, out, in] : {std::tuple<int64_t, int64_t, int64_t>{1, 40, 64}, {3, 70, 96}, {6, 33, 32},
                                   {9, 129, 160}, {16, 16, 64}}) {
    SCOPED_TRACE("n=" + std::to_string(n) + " out=" + std::to_string(out) + " in=" + std::to_string(in));
    std::vector<float> w(static_cast<size_t>(out * in)), x(static_cast<size_t>(n * in));
    for (auto& v : w) v = dist(rng) * 0.05f;
    for (auto& v : x) v = dist(rng);
    const int64_t panels = (out + 15) / 16, panel_bytes = packed_int8::panel_bytes(storage, in);
    std::vector<uint8_t> data(static_cast<size_t>(panels * panel_bytes), 0);
    const uint32_t type = storage == WeightStorage::Q8_0 ? kGgmlQ8_0 : kGgmlQ4_0;
    for (int64_t o = 0; o < panels * 16; ++o)
      for (int64_t b = 0; b < in / 32; ++b) {
        float block[32] = {};
        if (o < out) std::memcpy(block, w.data() + o * in + b * 32, sizeof(block));
        uint8_t bytes[34];
        quantize_blocks(type, block, 32, bytes);
        packed_int8::put_block(storage, data.data() + (o / 16) * panel_bytes, in, b, o % 16, bytes);
      }
    QuantizedRows q;
    quantize_rows(x.data(), in, n, in, q);
    std::vector<float> y(static_cast<size_t>(n * out), -7.0f);
    const int64_t mid = panels / 2;
    packed_int8::multiply(storage, kernel, data.data(), out, in, q, y.data(), out, 0, mid);
    packed_int8::multiply(storage, kernel, data.data(), out, in, q, y.data(), out, mid, panels);
    const std::vector<float> want = naive_int8_product(storage, w, out, in, x, in, n);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(y[i], want[i]) << "row " << i / out << " column " << i % out;
  }
}

// Extreme blocks, written as raw bytes: weights -128 and 127 (Q8_0; -128 is never produced by ggml's quantizer
// but a GGUF may hold it) or nibbles 0 and 15 (Q4_0: -8 and 7), against activations quantized to +-127, in
// uniform and alternating patterns. Where the kernel multiplies unsigned by signed bytes (vpmaddubsw sums two
// products into a saturating int16), these are the sums that would overflow first.
TEST_P(Int8KernelTest, ExtremeBlocksGiveTheDefinitionsBits) {
  const auto [storage, kernel] = GetParam();
  if (!packed_int8::int8_kernel_runs(kernel)) GTEST_SKIP() << "CPU lacks " << packed_int8::int8_kernel_name(kernel);
  const int64_t out = 32, in = 64, n = 4, blocks = in / 32;
  const bool q8 = storage == WeightStorage::Q8_0;
  const int lo = q8 ? -128 : -8, hi = q8 ? 127 : 7;
  // Weight row o, element t: four patterns (all lo, all hi, lo/hi alternating, hi/lo alternating).
  auto weight = [&](int64_t o, int64_t t) {
    switch (o % 4) {
      case 0: return lo;
      case 1: return hi;
      case 2: return t % 2 == 0 ? lo : hi;
      default: return t % 2 == 0 ? hi : lo;
    }
  };
  const uint16_t scale_bits = 0x3C00;  // 1.0 in half precision; block b of row o scaled by 2^-(o % 3)
  const int64_t panel_bytes = packed_int8::panel_bytes(storage, in);
  std::vector<uint8_t> data(static_cast<size_t>((out / 16) * panel_bytes), 0);
  std::vector<float> scales(static_cast<size_t>(out * blocks));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t bytes[34] = {};
      const uint16_t d = static_cast<uint16_t>(scale_bits - 0x0400 * (o % 3));
      std::memcpy(bytes, &d, 2);
      scales[o * blocks + b] = half_to_float(d);
      for (int64_t t = 0; t < 32; ++t) {
        const int v = weight(o, b * 32 + t);
        if (q8)
          bytes[2 + t] = static_cast<uint8_t>(static_cast<int8_t>(v));
        else if (t < 16)
          bytes[2 + t] = static_cast<uint8_t>(bytes[2 + t] | (v + 8));
        else
          bytes[2 + t - 16] = static_cast<uint8_t>(bytes[2 + t - 16] | ((v + 8) << 4));
      }
      packed_int8::put_block(storage, data.data() + (o / 16) * panel_bytes, in, b, o % 16, bytes);
    }
  // Activation rows: all +1, all -1, alternating, alternating the other way (each quantizes to +-127).
  std::vector<float> x(static_cast<size_t>(n * in));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t t = 0; t < in; ++t) x[j * in + t] = j == 0 ? 1.0f : j == 1 ? -1.0f : (t + j) % 2 == 0 ? 1.0f : -1.0f;
  QuantizedRows q;
  quantize_rows(x.data(), in, n, in, q);
  std::vector<float> y(static_cast<size_t>(n * out), -7.0f);
  packed_int8::multiply(storage, kernel, data.data(), out, in, q, y.data(), out, 0, out / 16);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t o = 0; o < out; ++o) {
      float acc = 0.0f;  // the definition, as naive_int8_product computes it
      for (int64_t b = 0; b < blocks; ++b) {
        int64_t sum = 0;
        for (int64_t t = 0; t < 32; ++t) {
          ASSERT_EQ(std::abs(q.q[j * in + b * 32 + t]), 127);
          sum += static_cast<int64_t>(q.q[j * in + b * 32 + t]) * weight(o, b * 32 + t);
        }
        acc = std::fmaf(static_cast<float>(sum), scales[o * blocks + b] * q.scale[j * blocks + b], acc);
      }
      ASSERT_EQ(y[j * out + o], acc) << "activation row " << j << ", weight row " << o << " (pattern " << o % 4 << ")";
    }
}

INSTANTIATE_TEST_SUITE_P(
    StorageAndKernel, Int8KernelTest,
    ::testing::Combine(::testing::Values(WeightStorage::Q8_0, WeightStorage::Q4_0),
                       ::testing::Values(packed_int8::Int8Kernel::Portable, packed_int8::Int8Kernel::Maddubs256,
                                         packed_int8::Int8Kernel::AvxVnni256, packed_int8::Int8Kernel::Avx512Vnni256,
                                         packed_int8::Int8Kernel::Avx512Vnni512)),
    [](const auto& info) {
      return std::string(weight_storage_name(std::get<0>(info.param))) + "_" + kernel_label(std::get<1>(info.param));
    });

}  // namespace
}  // namespace draftlab
