// ggml's block-quantized tensor types Q8_0 and Q4_0 (what `llama-quantize ... Q8_0|Q4_0 --pure` writes): blocks of
// 32 consecutive values along a row, each a float16 scale d and 32 integers q, value = d * q.
//   Q8_0: 34 bytes  = d | 32 x int8 q                          (d = max|x| / 127, q = round(x / d))
//   Q4_0: 18 bytes  = d | 16 bytes, byte j = q_j | q_{j+16} << 4 (d = -x_m / 8 where x_m is the value of largest
//                    magnitude, q = min(15, trunc(x / d + 8.5)) stored with an offset of 8: value = d * (q - 8))
// The quantizers follow ggml's reference rows (quantize_row_q8_0_ref / quantize_row_q4_0_ref in ggml-quants.c), so
// a file draftlab writes holds the bytes llama-quantize would write from the same float32 values.
#pragma once

#include <cstddef>
#include <cstdint>

namespace draftlab {

constexpr int64_t kGgmlQuantBlock = 32;  // values per block (QK8_0 = QK4_0 = 32)

// Bytes of one block of `ggml_type` (8 = Q8_0: 34, 2 = Q4_0: 18); 0 for a type that is not one of these two.
size_t ggml_quant_block_bytes(uint32_t ggml_type);

// n values (a multiple of 32) <-> n / 32 blocks.
void quantize_q8_0(const float* x, int64_t n, uint8_t* blocks);
void quantize_q4_0(const float* x, int64_t n, uint8_t* blocks);
void dequantize_q8_0(const uint8_t* blocks, int64_t n, float* x);
void dequantize_q4_0(const uint8_t* blocks, int64_t n, float* x);

// By ggml type number (Q8_0 or Q4_0; anything else throws Error).
void quantize_blocks(uint32_t ggml_type, const float* x, int64_t n, uint8_t* blocks);
void dequantize_blocks(uint32_t ggml_type, const uint8_t* blocks, int64_t n, float* x);

}  // namespace draftlab
