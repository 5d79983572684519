// ggml's Q8_0 / Q4_0 blocks (core/io/ggml_quant.h) against what their definitions say: the scale stored as the
// float16 of max|x| / 127 (Q8_0) or -x_max / 8 (Q4_0), each integer the rounded quotient (computed here in double),
// llama.cpp's nibble order, hand-worked blocks, error bounds of the dequantized values; and through GGUF: a Q8_0 or
// Q4_0 tensor written by GgufWriter reads back as an F32 entry over its blocks, bad shapes and truncated files
// throw Error naming the file and the tensor. Torch-free (also run under AddressSanitizer). Byte equality with
// llama-quantize's output: tests/cli/test_export_gguf_cli.sh, when the peer is built.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <tuple>
#include <algorithm>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/io/ggml_quant.h"
#include "core/io/gguf.h"
#include "core/io/gguf_writer.h"
#include "core/ops/packed_matrix.h"
#include "test_errors.h"
#include "test_paths.h"

namespace draftlab {
namespace {

std::string temp_path(const std::string& name) { return testing::temp_dir() + "/" + name; }

float stored_scale(const uint8_t* block) {
  uint16_t h;
  std::memcpy(&h, block, 2);
  return half_to_float(h);
}

// Blocks of varied scale: uniform values, one large outlier, tiny values (subnormal float16 scales), zeros.
std::vector<float> test_values(int64_t blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(blocks * kGgmlQuantBlock));
  for (int64_t b = 0; b < blocks; ++b) {
    const float scale = b % 4 == 0 ? 1e-6f : b % 4 == 1 ? 0.05f : b % 4 == 2 ? 3.0f : 0.0f;
    for (int64_t j = 0; j < kGgmlQuantBlock; ++j) x[b * kGgmlQuantBlock + j] = scale * normal(rng);
    if (b % 5 == 2) x[b * kGgmlQuantBlock + b % kGgmlQuantBlock] = -40.0f * scale;  // an outlier sets the scale
  }
  return x;
}

TEST(GgmlQuant, Q8_0StoresTheScaleAndRoundedQuotients) {
  const int64_t blocks = 40;
  const std::vector<float> x = test_values(blocks, 1);
  std::vector<uint8_t> q(blocks * ggml_quant_block_bytes(kGgmlQ8_0));
  ASSERT_EQ(ggml_quant_block_bytes(kGgmlQ8_0), 34u);
  quantize_q8_0(x.data(), static_cast<int64_t>(x.size()), q.data());
  std::vector<float> back(x.size());
  dequantize_q8_0(q.data(), static_cast<int64_t>(x.size()), back.data());
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = &x[b * 32];
    const uint8_t* block = &q[b * 34];
    double amax = 0.0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(static_cast<double>(xb[j])));
    const float d = static_cast<float>(amax / 127.0);
    EXPECT_EQ(stored_scale(block), half_to_float(float_to_half(d))) << "block " << b;
    for (int j = 0; j < 32; ++j) {
      const double want = amax == 0.0 ? 0.0 : std::round(xb[j] / (amax / 127.0));
      EXPECT_EQ(static_cast<int8_t>(block[2 + j]), want) << "block " << b << " value " << j;
      // value = stored scale x integer: within half a step of x, plus what rounding the scale moved it.
      const double step = std::fabs(static_cast<double>(stored_scale(block)));
      EXPECT_EQ(back[b * 32 + j], stored_scale(block) * static_cast<float>(static_cast<int8_t>(block[2 + j])));
      EXPECT_LE(std::fabs(back[b * 32 + j] - xb[j]), step / 2 + 127 * std::fabs(step - d) + 1e-12);
    }
  }
}

TEST(GgmlQuant, Q4_0StoresTheSignedScaleAndNibblesInLlamaCppsOrder) {
  // Worked by hand: x_0 = -8 is the largest magnitude, so d = -8 / -8 = 1 and q = trunc(x + 8.5), capped at 15;
  // x_j = j - 8 (j < 16) gives q = j, x_{16+j} = 7 - j gives q = 15 - j; byte j = q_j | q_{16+j} << 4.
  std::vector<float> x(32);
  for (int j = 0; j < 16; ++j) {
    x[j] = static_cast<float>(j - 8);
    x[16 + j] = static_cast<float>(7 - j);
  }
  std::vector<uint8_t> q(18);
  ASSERT_EQ(ggml_quant_block_bytes(kGgmlQ4_0), 18u);
  quantize_q4_0(x.data(), 32, q.data());
  EXPECT_EQ(stored_scale(q.data()), 1.0f);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[2 + j], j | ((15 - j) << 4)) << "byte " << j;
  std::vector<float> back(32);
  dequantize_q4_0(q.data(), 32, back.data());
  EXPECT_EQ(back, x);  // every value is an integer step of d = 1

  // A positive extreme: d = 8 / -8 = -1, so x = 8 maps to q = 0 and -7.5 is the far end (q = 15.5 -> 15).
  std::vector<float> y(32, 0.0f);
  y[3] = 8.0f;
  y[20] = -7.6f;
  quantize_q4_0(y.data(), 32, q.data());
  EXPECT_EQ(stored_scale(q.data()), -1.0f);
  EXPECT_EQ(q[2 + 3] & 0x0f, 0);
  EXPECT_EQ(q[2 + 4] >> 4, 15);  // y[20] is the high nibble of byte 4
  EXPECT_EQ(q[2 + 0] & 0x0f, 8);  // zero is q = 8
}

TEST(GgmlQuant, Q4_0QuotientsAndErrorBoundsOnVariedBlocks) {
  const int64_t blocks = 40;
  const std::vector<float> x = test_values(blocks, 2);
  std::vector<uint8_t> q(blocks * 18);
  quantize_q4_0(x.data(), static_cast<int64_t>(x.size()), q.data());
  std::vector<float> back(x.size());
  dequantize_q4_0(q.data(), static_cast<int64_t>(x.size()), back.data());
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = &x[b * 32];
    const uint8_t* block = &q[b * 18];
    double extreme = 0.0;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(xb[j]) > std::fabs(extreme)) extreme = xb[j];
    const double d = extreme / -8.0;
    EXPECT_EQ(stored_scale(block), half_to_float(float_to_half(static_cast<float>(d)))) << "block " << b;
    for (int j = 0; j < 32; ++j) {
      const int nibble = j < 16 ? block[2 + j] & 0x0f : block[2 + j - 16] >> 4;
      const double want = d == 0.0 ? 8.0 : std::min(15.0, std::floor(xb[j] / d + 8.5));
      EXPECT_EQ(nibble, want) << "block " << b << " value " << j;
      const double step = std::fabs(static_cast<double>(stored_scale(block)));
      // Half a step, except past q = 15.5 where the cap holds x up to a whole step away.
      const double bound = (d != 0.0 && xb[j] / d > 7.5 ? step : step / 2) + 8 * std::fabs(step - std::fabs(d));
      EXPECT_LE(std::fabs(back[b * 32 + j] - xb[j]), bound + 1e-12) << "block " << b << " value " << j;
    }
  }
}

TEST(GgmlQuant, LengthsThatAreNotWholeBlocksAreRejected) {
  std::vector<float> x(40, 1.0f);
  std::vector<uint8_t> q(64);
  EXPECT_THROW(quantize_q8_0(x.data(), 40, q.data()), Error);
  EXPECT_THROW(dequantize_q4_0(q.data(), 33, x.data()), Error);
  EXPECT_THROW(quantize_blocks(kGgmlF16, x.data(), 32, q.data()), Error);
}

TEST(GgmlQuant, GgufQuantizedTensorsReadBackAsTheirDequantizedValues) {
  const std::vector<float> x = test_values(6, 3);  // [2, 96]
  std::vector<uint8_t> q8(6 * 34), q4(6 * 18);
  quantize_q8_0(x.data(), 192, q8.data());
  quantize_q4_0(x.data(), 192, q4.data());
  const std::string path = temp_path("quantized_tensors.gguf");
  GgufWriter w;
  w.add_tensor("q8", kGgmlQ8_0, {2, 96}, q8.data(), q8.size());
  w.add_tensor("q4", kGgmlQ4_0, {2, 96}, q4.data(), q4.size());
  w.add_tensor("plain", kGgmlF32, {192}, x.data(), x.size() * 4);
  EXPECT_THROW(w.add_tensor("bad", kGgmlQ8_0, {96, 2}, q8.data(), q8.size()), Error);  // rows of 2 values
  EXPECT_THROW(w.add_tensor("short", kGgmlQ4_0, {2, 96}, q4.data(), q4.size() - 1), Error);
  w.write(path);

  const GgufTensorFile file(path);
  for (const auto& [name, type, bytes] : {std::make_tuple("q8", kGgmlQ8_0, &q8), std::make_tuple("q4", kGgmlQ4_0, &q4)}) {
    EXPECT_EQ(file.stored_type(name), static_cast<uint32_t>(type));
    // An F32 entry over the file's blocks (checkpoint_tensor dequantizes them: tests/model/test_gguf_model.cpp).
    const TensorEntry* e = file.find(name);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->dtype, DType::F32);
    EXPECT_EQ(e->ggml_block_type, static_cast<uint32_t>(type));
    EXPECT_EQ(e->shape, (std::vector<int64_t>{2, 96}));
    ASSERT_EQ(e->nbytes, bytes->size());
    EXPECT_EQ(std::memcmp(e->data, bytes->data(), e->nbytes), 0) << name;
  }
  EXPECT_EQ(file.find("plain")->ggml_block_type, 0u);
  EXPECT_EQ(file.stored_type("plain"), static_cast<uint32_t>(kGgmlF32));
  EXPECT_FALSE(file.stored_type("absent").has_value());

  // Truncated inside the last quantized tensor's blocks: Error naming the file and the tensor.
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const uint64_t q4_end = file.gguf().data_offset + file.gguf().tensors[1].offset + q4.size();
  const std::string cut = temp_path("quantized_cut.gguf");
  std::ofstream(cut, std::ios::binary).write(all.data(), static_cast<std::streamsize>(q4_end - 5));
  testing::expect_error([&] { GgufTensorFile{cut}; }, {cut, "tensor q4", "truncated"});
}

TEST(GgmlQuant, GgufQuantizedRowsThatAreNotWholeBlocksNameTheTensor) {
  // An F32 [2, 48] tensor whose type field is patched to Q8_0: 48-value rows are not whole blocks.
  std::vector<float> x(96, 0.5f);
  const std::string written = temp_path("to_patch_q8.gguf");
  GgufWriter w;
  w.add_tensor("odd", kGgmlF32, {2, 48}, x.data(), x.size() * 4);
  w.write(written);
  std::ifstream in(written, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find("odd") + 3 + 4 + 2 * 8;  // name | n_dims | 2 dims | type
  const uint32_t q8_0 = kGgmlQ8_0;
  std::memcpy(&bytes[at], &q8_0, 4);
  const std::string path = temp_path("odd_rows_q8.gguf");
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  testing::expect_error([&] { GgufTensorFile{path}; }, {path, "tensor odd shape", "multiple of 32", "48"});
}

}  // namespace
}  // namespace draftlab
