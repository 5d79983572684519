#include "core/io/ggml_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/base/error.h"
#include "core/base/half_precision.h"  // round to nearest even, as F16C does
#include "core/io/gguf.h"

namespace draftlab {

namespace {

constexpr size_t kQ8Bytes = 2 + kGgmlQuantBlock;      // block_q8_0
constexpr size_t kQ4Bytes = 2 + kGgmlQuantBlock / 2;  // block_q4_0

void put_half(uint8_t* at, float v) {
  const uint16_t h = float_to_half(v);
  std::memcpy(at, &h, 2);
}

float get_half(const uint8_t* at) {
  uint16_t h;
  std::memcpy(&h, at, 2);
  return half_to_float(h);
}

void check_length(int64_t n, const char* what) {
  check(n >= 0 && n % kGgmlQuantBlock == 0,
        [&] { return std::string(what) + ": expected a multiple of 32 values, got " + std::to_string(n); });
}

}  // namespace

size_t ggml_quant_block_bytes(uint32_t ggml_type) {
  switch (ggml_type) {
    case kGgmlQ8_0: return kQ8Bytes;
    case kGgmlQ4_0: return kQ4Bytes;
    default: return 0;
  }
}

// The scale is computed in float32 and stored rounded to float16; the integers use the unrounded one, as in ggml.
void quantize_q8_0(const float* x, int64_t n, uint8_t* blocks) {
  check_length(n, "quantize_q8_0");
  for (int64_t b = 0; b < n / kGgmlQuantBlock; ++b, x += kGgmlQuantBlock, blocks += kQ8Bytes) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kGgmlQuantBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_half(blocks, d);
    for (int64_t j = 0; j < kGgmlQuantBlock; ++j)
      blocks[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
  }
}

void quantize_q4_0(const float* x, int64_t n, uint8_t* blocks) {
  check_length(n, "quantize_q4_0");
  constexpr int64_t kHalf = kGgmlQuantBlock / 2;
  for (int64_t b = 0; b < n / kGgmlQuantBlock; ++b, x += kGgmlQuantBlock, blocks += kQ4Bytes) {
    float amax = 0.0f, max = 0.0f;  // the value of largest magnitude, with its sign (the first one on ties)
    for (int64_t j = 0; j < kGgmlQuantBlock; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_half(blocks, d);
    for (int64_t j = 0; j < kHalf; ++j) {
      // Two statements: x * id rounded to float before + 8.5 (no fused multiply-add), as ggml's reference has it.
      const volatile float lo = x[j] * id, hi = x[kHalf + j] * id;
      const auto q_lo = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(lo + 8.5f)));
      const auto q_hi = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(hi + 8.5f)));
      blocks[2 + j] = static_cast<uint8_t>(q_lo | (q_hi << 4));
    }
  }
}

void dequantize_q8_0(const uint8_t* blocks, int64_t n, float* x) {
  check_length(n, "dequantize_q8_0");
  for (int64_t b = 0; b < n / kGgmlQuantBlock; ++b, x += kGgmlQuantBlock, blocks += kQ8Bytes) {
    const float d = get_half(blocks);
    for (int64_t j = 0; j < kGgmlQuantBlock; ++j) x[j] = d * static_cast<float>(static_cast<int8_t>(blocks[2 + j]));
  }
}

void dequantize_q4_0(const uint8_t* blocks, int64_t n, float* x) {
  check_length(n, "dequantize_q4_0");
  constexpr int64_t kHalf = kGgmlQuantBlock / 2;
  for (int64_t b = 0; b < n / kGgmlQuantBlock; ++b, x += kGgmlQuantBlock, blocks += kQ4Bytes) {
    const float d = get_half(blocks);
    for (int64_t j = 0; j < kHalf; ++j) {
      x[j] = d * static_cast<float>((blocks[2 + j] & 0x0f) - 8);
      x[kHalf + j] = d * static_cast<float>((blocks[2 + j] >> 4) - 8);
    }
  }
}

void quantize_blocks(uint32_t ggml_type, const float* x, int64_t n, uint8_t* blocks) {
  switch (ggml_type) {
    case kGgmlQ8_0: return quantize_q8_0(x, n, blocks);
    case kGgmlQ4_0: return quantize_q4_0(x, n, blocks);
    default: throw Error("quantize_blocks: expected Q8_0 or Q4_0, got " + ggml_type_name(ggml_type));
  }
}

void dequantize_blocks(uint32_t ggml_type, const uint8_t* blocks, int64_t n, float* x) {
  switch (ggml_type) {
    case kGgmlQ8_0: return dequantize_q8_0(blocks, n, x);
    case kGgmlQ4_0: return dequantize_q4_0(blocks, n, x);
    default: throw Error("dequantize_blocks: expected Q8_0 or Q4_0, got " + ggml_type_name(ggml_type));
  }
}

}  // namespace draftlab
