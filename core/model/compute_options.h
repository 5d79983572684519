// Where and in what precision a model runs. Passed through every constructor so the same code runs on CUDA.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "core/ops/packed_matrix.h"

namespace draftlab {

// Which implementation runs no-grad CPU forwards: the native path (core/model/native_decoder.h) or libtorch's
// reference ops. Auto = native wherever it applies (CPU, float32 activations).
enum class CpuPath { Auto, Native, Reference };

struct ComputeOptions {
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;  // activations and KV cache (and the reference path's weights); logits float32
  CpuPath cpu_path = CpuPath::Auto;
  // How the native path stores weights; unset = as the checkpoint stores them (float32 for weights made in
  // memory). Accumulation is float32 either way.
  std::optional<WeightStorage> weights;
  // How the KV cache stores keys and values; unset = the activation dtype. float16 (llama.cpp's default) halves
  // what attention reads at long contexts; attention widens it exactly and sums in float32 on both paths.
  std::optional<at::ScalarType> kv_cache;
  // How q8_0 / q4_0 weights meet activations on the native path (core/ops/packed_matrix.h): Float (weights widened,
  // the dequantized model's arithmetic) or Int8 (activations quantized to Q8_0, integer dot products, llama.cpp's).
  BlockDot block_dot = BlockDot::Float;

  at::ScalarType kv_cache_dtype() const { return kv_cache.value_or(dtype); }

  at::TensorOptions tensor_options() const { return at::TensorOptions().device(device).dtype(dtype); }
};

// CPU float32 on the reference path: for loading a model only to read or convert its weights.
inline ComputeOptions reference_options() {
  ComputeOptions o;
  o.cpu_path = CpuPath::Reference;
  return o;
}

// True when forwards under these options run on the native path. Throws Error when the native path is asked for
// explicitly and cannot run (another device or activation dtype).
bool uses_native_path(const ComputeOptions& options);

// "auto", "native", "reference" (alias "libtorch"). Throws Error listing the valid names.
CpuPath parse_cpu_path(const std::string& name);
// A --weights value: "auto" (unset), "float32"/"fp32"/"f32", "float16"/"fp16"/"f16", "bfloat16"/"bf16", "q8_0", "q4_0".
// Throws Error listing the valid names.
std::optional<WeightStorage> parse_weight_storage(const std::string& name);

// A --quant-dot value: "float", "int8". Throws Error listing the valid names.
BlockDot parse_block_dot(const std::string& name);
// Throws Error when Int8 cannot apply: off the native path, or weights that are not q8_0 / q4_0.
void check_block_dot(BlockDot dot, bool native_path, WeightStorage storage);

// A --kv-cache value: "auto" (unset: the activation dtype), "float32"/"fp32"/"f32", "float16"/"fp16"/"f16".
// Throws Error listing the valid names.
std::optional<at::ScalarType> parse_kv_cache_storage(const std::string& name);

// "float32"/"fp32", "bfloat16"/"bf16", "float16"/"fp16". Throws Error listing the valid names.
at::ScalarType parse_compute_dtype(const std::string& name);
// "cpu", "cuda", "cuda:1". Throws Error if unknown or if CUDA is asked for and not available.
at::Device parse_compute_device(const std::string& name);
std::string compute_dtype_name(at::ScalarType t);

// Throws Error when this libtorch cannot run the combination (libtorch 1.13 has no float16 GEMM on CPU).
void check_supported(const ComputeOptions& options);

}  // namespace draftlab
