// Where and in what precision a model runs. Passed through every constructor so the same code runs on CUDA.
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace draftlab {

struct ComputeOptions {
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;  // weights, activations and KV cache; logits are always float32

  at::TensorOptions tensor_options() const { return at::TensorOptions().device(device).dtype(dtype); }
};

// "float32"/"fp32", "bfloat16"/"bf16", "float16"/"fp16". Throws Error listing the valid names.
at::ScalarType parse_compute_dtype(const std::string& name);
// "cpu", "cuda", "cuda:1". Throws Error if unknown or if CUDA is asked for and not available.
at::Device parse_compute_device(const std::string& name);
std::string compute_dtype_name(at::ScalarType t);

// Throws Error when this libtorch cannot run the combination (libtorch 1.13 has no float16 GEMM on CPU).
void check_supported(const ComputeOptions& options);

}  // namespace draftlab
