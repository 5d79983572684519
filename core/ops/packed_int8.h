// The BlockDot::Int8 layout of q8_0 / q4_0 panels and its kernels (private to core/ops; PackedMatrix is the API).
//
// Integer dot-product instructions multiply 4 bytes per 32-bit lane and add the 4 products into the lane, so a
// panel (16 output rows = lanes) stores, for every block of 32 inputs, 64-byte groups: group g holds 4 consecutive
// inputs of each lane in that lane's 32-bit cell (lane c at bytes 4c .. 4c + 3).
//   q8_0: 8 groups per block (inputs 4g .. 4g + 3), each weight as the unsigned byte q + 128.
//   q4_0: 4 groups per block; a byte holds input 8g + j (j < 4) in its low nibble and 8g + 4 + j in its high one,
//         as ggml's q in 0..15 (value q - 8).
// After all blocks' values: the float16 scale d of every (block, lane), block-major; the panel padded to 64 bytes.
//
// Per row r, lane c and block b the kernels form s = sum_j w_j * x_j exactly in 32-bit integers (w the signed
// weight: q8_0 q, q4_0 q - 8; x the row's Q8_0 integers), however their instruction gets there (an unsigned
// operand's offset is taken back with offset x the block's sum of x), then acc = fma(float(s), d_w * d_x, acc) over
// b in order, from acc = 0: the same float32 operations on every kernel, so every kernel gives the same bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/ops/packed_matrix.h"

namespace draftlab::packed_int8 {

constexpr int64_t kBlock = 32;

// Bytes of one panel of `in` inputs (a multiple of 32).
int64_t panel_bytes(WeightStorage s, int64_t in);
// Writes one ggml block (core/io/ggml_quant.h bytes: float16 d, then q) of lane `lane`, block `b` into a panel.
void put_block(WeightStorage s, uint8_t* panel, int64_t in, int64_t b, int64_t lane, const uint8_t* ggml_block);
// The weight at input i of lane `lane`, d * q as float32.
float value(WeightStorage s, const uint8_t* panel, int64_t in, int64_t i, int64_t lane);

// The kernel families, each giving the same bits. 256-bit: vpmaddubsw (AVX2), vpdpbusd in its AVX-VNNI encoding,
// and the same code in its AVX512-VNNI + VL encoding (to test the AVX-VNNI code on AVX-512 CPUs); 512-bit: vpdpbusd.
enum class Int8Kernel { Portable, Maddubs256, AvxVnni256, Avx512Vnni256, Avx512Vnni512 };
const char* int8_kernel_name(Int8Kernel k);
// Whether this CPU runs it (DRAFTLAB_ISA aside).
bool int8_kernel_runs(Int8Kernel k);
// What PackedMatrix uses for a KernelIsa on this CPU: the fastest of that width or less.
Int8Kernel int8_kernel_for(KernelIsa isa);
// y = x · Wᵀ for panels [p0, p1) (see PackedMatrix::multiply).
void multiply(WeightStorage s, Int8Kernel kernel, const uint8_t* data, int64_t out, int64_t in,
              const QuantizedRows& x, float* y, int64_t ldy, int64_t p0, int64_t p1);

}  // namespace draftlab::packed_int8
