#include "core/model/compute_options.h"

#include <ATen/Context.h>

#include "core/base/error.h"

namespace draftlab {

at::ScalarType parse_compute_dtype(const std::string& name) {
  if (name == "float32" || name == "fp32" || name == "f32") return at::kFloat;
  if (name == "bfloat16" || name == "bf16") return at::kBFloat16;
  if (name == "float16" || name == "fp16" || name == "f16" || name == "half") return at::kHalf;
  throw Error("--dtype: expected one of float32, bfloat16, float16, got '" + name + "'");
}

at::Device parse_compute_device(const std::string& name) {
  if (name == "cpu") return at::kCPU;
  if (name.rfind("cuda", 0) == 0) {
    if (!at::hasCUDA()) throw Error("--device: '" + name + "' asked for, but this libtorch has no CUDA device");
    try {
      return at::Device(name);
    } catch (const std::exception&) {
      throw Error("--device: expected cpu, cuda or cuda:N, got '" + name + "'");
    }
  }
  throw Error("--device: expected cpu, cuda or cuda:N, got '" + name + "'");
}

std::string compute_dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: return c10::toString(t);
  }
}

bool uses_native_path(const ComputeOptions& o) {
  const bool applies = o.device.is_cpu() && o.dtype == at::kFloat;
  if (o.cpu_path == CpuPath::Native && !applies)
    throw Error("--path native: the native path runs float32 activations on the CPU; got --dtype " +
                compute_dtype_name(o.dtype) + " on " + o.device.str() + " (use --path reference)");
  return applies && o.cpu_path != CpuPath::Reference;
}

CpuPath parse_cpu_path(const std::string& name) {
  if (name == "auto") return CpuPath::Auto;
  if (name == "native") return CpuPath::Native;
  if (name == "reference" || name == "libtorch") return CpuPath::Reference;
  throw Error("--path: expected one of auto, native, reference, got '" + name + "'");
}

std::optional<WeightStorage> parse_weight_storage(const std::string& name) {
  if (name == "auto") return std::nullopt;
  if (name == "float32" || name == "fp32" || name == "f32") return WeightStorage::Float32;
  if (name == "float16" || name == "fp16" || name == "f16" || name == "half") return WeightStorage::Float16;
  if (name == "bfloat16" || name == "bf16") return WeightStorage::BFloat16;
  if (name == "q8_0") return WeightStorage::Q8_0;
  if (name == "q4_0") return WeightStorage::Q4_0;
  throw Error("--weights: expected one of auto, float32, float16, bfloat16, q8_0, q4_0, got '" + name + "'");
}

std::optional<at::ScalarType> parse_kv_cache_storage(const std::string& name) {
  if (name == "auto") return std::nullopt;
  if (name == "float32" || name == "fp32" || name == "f32") return at::kFloat;
  if (name == "float16" || name == "fp16" || name == "f16" || name == "half") return at::kHalf;
  throw Error("--kv-cache: expected one of auto, float32, float16, got '" + name + "'");
}

BlockDot parse_block_dot(const std::string& name) {
  if (name == "float") return BlockDot::Float;
  if (name == "int8") return BlockDot::Int8;
  throw Error("--quant-dot: expected float or int8, got \"" + name + "\"");
}

void check_block_dot(BlockDot dot, bool native_path, WeightStorage storage) {
  if (dot != BlockDot::Int8) return;
  if (!native_path) throw Error("--quant-dot int8: integer dot products run on the native path only (--path native)");
  if (storage != WeightStorage::Q8_0 && storage != WeightStorage::Q4_0)
    throw Error(std::string("--quant-dot int8: expected q8_0 or q4_0 weights (--weights q8_0|q4_0, or a Q8_0 / Q4_0 "
                            ".gguf), got ") + weight_storage_name(storage));
}

void check_supported(const ComputeOptions& options) {
  const at::ScalarType kv = options.kv_cache_dtype();
  if (kv != at::kFloat && kv != at::kHalf && kv != options.dtype)
    throw Error("--kv-cache: expected float32, float16 or the compute dtype (" + compute_dtype_name(options.dtype) +
                "), got " + compute_dtype_name(kv));
  if (options.device.is_cpu() && options.dtype == at::kHalf)
    throw Error("--dtype float16: libtorch 1.13 has no float16 matrix multiply on CPU; use float32 or bfloat16 "
                "(float16 works on CUDA)");
  if (options.dtype != at::kFloat && options.dtype != at::kBFloat16 && options.dtype != at::kHalf)
    throw Error("compute dtype: expected float32, bfloat16 or float16, got " + compute_dtype_name(options.dtype));
}

}  // namespace draftlab
