// PackedMatrix - a weight matrix W [out, in] laid out for streaming, and y = x · Wᵀ over it for 1..64 rows of x.
//
// Decoding reads every weight once per generated token, so the forward is bound by how fast weights stream from
// memory. The layout makes that stream a handful of purely sequential runs: W is cut into panels of 16 output
// rows, and a panel is stored as in x 16 values, input index major (panel p, input i holds W[16p .. 16p+15][i]).
// The kernel keeps one 16-wide accumulator per (row of x, panel) in registers over the whole input, loads each
// panel vector once and uses it for every row of x: weights are read from memory once per call whatever n is.
//
// Storage: float32, float16 or bfloat16, accumulation always float32 (half-precision values are widened exactly
// with F16C / a shift). Half-precision storage halves the bytes each forward reads. q8_0 stores ggml's Q8_0
// (core/io/ggml_quant.h: per output row, blocks of 32 inputs sharing a float16 scale d, int8 q) as int8 panels plus
// a float32 scale per (row, block): the kernels widen d * q, which is exact in float32, so a Q8_0 matrix multiplies
// bit for bit like the float32 matrix of its dequantized values, reading ~1.1 bytes per weight. q4_0 likewise stores
// ggml's Q4_0 (value d * (q - 8), q in 0..15) as nibbles plus the same scales: ~0.6 bytes per weight.
//
// Integer dot products (BlockDot::Int8, opt-in): llama.cpp's way for Q8_0 / Q4_0. Each row of x is quantized to
// Q8_0 as ggml's reference quantizer does (blocks of 32, float16 scale d_x, int8 q_x), each block's products summed
// exactly in integers, and y = sum over blocks of (d_w * d_x) * sum_q, one float32 FMA per block in order. A
// quarter of the bytes per multiply-add and int8 dot-product instructions (AVX2 maddubs, AVX512-VNNI dpbusd); the
// result is no longer the dequantized float32 matrix's but its own, identical bit for bit on every kernel. Layout
// (packed_int8.h): per block, groups of 4 (Q8_0) or 8 (Q4_0) inputs per lane in 32-bit cells, then float16 scales.
//
// Row independence: y[j, o] is one float32 FMA chain over i = 0 .. in-1 in order, for every n, every tile shape
// and every SIMD width (AVX-512, AVX2 and the portable path with fmaf) - so the logits of a token verified inside
// a draft tree are bit-identical to the logits vanilla decoding computes for it. Lossless greedy decoding rests
// on this; tests check it.
//
// Kernels are chosen at run time: AVX-512 (F + BW + VL) where the CPU has it, else AVX2 + FMA + F16C, else
// portable C++. DRAFTLAB_ISA=avx2|portable caps the choice (for comparisons and tests).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/base/cpu_features.h"    // KernelIsa, kernel_isa_name, best_kernel_isa
#include "core/base/half_precision.h"  // float_to_half, half_to_float, ... (used by the kernels' callers too)

namespace draftlab {

enum class WeightStorage { Float32, Float16, BFloat16, Q8_0, Q4_0 };

// How block-quantized (q8_0 / q4_0) weights meet x. Float: each weight widened to float32, so the product is that of
// the dequantized float32 matrix. Int8: x quantized to Q8_0 per row and integer dot products (see above). Float
// storages ignore it.
enum class BlockDot { Float, Int8 };
// "float" / "int8".
const char* block_dot_name(BlockDot d);

// "float32" / "float16" / "bfloat16" / "q8_0" / "q4_0".
const char* weight_storage_name(WeightStorage s);
// Bytes one panel (16 output rows) of `in` inputs takes (BlockDot::Float layout).
int64_t panel_bytes(WeightStorage s, int64_t in);

// The instruction sets a kernel can use (KernelIsa) and the best this CPU runs, capped by DRAFTLAB_ISA
// (best_kernel_isa()): core/base/cpu_features.h.
// The instruction an Int8 kernel of `isa` multiplies with on this CPU: "vpdpbusd zmm" (AVX-512 with VNNI),
// "vpdpbusd ymm (AVX-VNNI)" (AVX2 or AVX-512 CPUs with AVX-VNNI), "vpmaddubsw" (other AVX2 / AVX-512), "scalar".
const char* int8_dot_instruction(KernelIsa isa);

// Rows of x quantized to Q8_0 for BlockDot::Int8 (ggml's reference quantizer, core/io/ggml_quant.h): q row-major
// [n, in], per row and block of 32 the scale d (float16, widened) and the sum of q (kernels with an unsigned operand
// subtract offset x sum). Buffers keep their capacity between calls.
struct QuantizedRows {
  int64_t n = 0, in = 0;
  std::vector<int8_t> q;
  std::vector<float> scale;
  std::vector<int32_t> sum;
  int64_t blocks() const { return in / 32; }
};
// x [n, in] (row stride ldx), in a multiple of 32 (std::invalid_argument otherwise).
void quantize_rows(const float* x, int64_t ldx, int64_t n, int64_t in, QuantizedRows& out);

class PackedMatrix {
 public:
  static constexpr int64_t kPanel = 16;  // output rows per panel

  PackedMatrix() = default;
  // Packs W [out, in] given by strides: W[o][i] = w[o * stride_out + i * stride_in] (so a row-major [out, in]
  // matrix has stride_out = in, stride_in = 1, and a column-major one stride_out = 1, stride_in = out).
  // q8_0 / q4_0 quantize each row's blocks as ggml does and need `in` a multiple of 32 (std::invalid_argument
  // otherwise). dot: see BlockDot (ignored for float storages).
  PackedMatrix(const float* w, int64_t out, int64_t in, int64_t stride_out, int64_t stride_in, WeightStorage storage,
               BlockDot dot = BlockDot::Float);

  int64_t out() const { return out_; }
  int64_t in() const { return in_; }
  int64_t panels() const { return (out_ + kPanel - 1) / kPanel; }
  WeightStorage storage() const { return storage_; }
  BlockDot dot() const { return dot_; }
  int64_t bytes() const { return panels() * panel_size(); }
  bool empty() const { return out_ == 0; }
  // q8_0 / q4_0: whether quantizing reproduced every value it was packed from (true for blocks dequantized from
  // such a file). Float storages are not checked here (true): they are exact when the storage is the checkpoint's
  // own or float32, which the caller knows without looking at values.
  bool exact() const { return exact_; }

  // W[o][i] as stored (widened to float32).
  float at(int64_t o, int64_t i) const;
  // Row o of W, out[i] = W[o][i] for i < in() (widened to float32): an embedding lookup from a tied LM head.
  void row(int64_t o, float* out) const;

  // y[j * ldy + o] = sum_i x[j * ldx + i] * W[o][i] for j < n and o in panels [panel_begin, panel_end) (output
  // columns clipped to out()). Callers split panels across threads. isa: a kernel no better than
  // best_kernel_isa() (tests force each one).
  void multiply(const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t panel_begin,
                int64_t panel_end) const;
  void multiply(const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t panel_begin, int64_t panel_end,
                KernelIsa isa) const;
  // BlockDot::Int8: the same product from x already quantized (quantize_rows once, then every thread's panels; the
  // float overloads above quantize on each call).
  void multiply(const QuantizedRows& x, float* y, int64_t ldy, int64_t panel_begin, int64_t panel_end) const;
  void multiply(const QuantizedRows& x, float* y, int64_t ldy, int64_t panel_begin, int64_t panel_end,
                KernelIsa isa) const;

 private:
  int64_t panel_size() const;  // bytes of one panel in this storage and layout

  std::shared_ptr<void> data_;  // 64-byte aligned panels
  int64_t out_ = 0, in_ = 0;
  WeightStorage storage_ = WeightStorage::Float32;
  BlockDot dot_ = BlockDot::Float;
  bool exact_ = true;
};

}  // namespace draftlab
