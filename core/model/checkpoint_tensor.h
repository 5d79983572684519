// A tensor read from a checkpoint onto the compute device and dtype, after checking its shape.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "core/io/tensor_entry.h"
#include "core/model/compute_options.h"
#include "core/ops/packed_matrix.h"

namespace draftlab {

// Throws Error::in_file(file, "<name> shape", "<expected><note>", actual) on a shape mismatch, and names the
// dtype when it is not F32/F16/BF16. Copies the bytes (safetensors offsets need not be aligned for vector loads);
// dequantizes ggml blocks (TensorEntry::ggml_block_type) to float32.
at::Tensor checkpoint_tensor(const TensorEntry& entry, const std::vector<int64_t>& expected_shape,
                             const ComputeOptions& options, const std::string& note = " (from the model config)");

// How a checkpoint stores its weights, read off one of its tensors (checkpoints store their projections in one
// dtype): float16, bfloat16, q8_0 / q4_0 (a GGUF's blocks), else float32 (also for nullptr). The native path keeps
// that storage by default.
WeightStorage checkpoint_storage(const TensorEntry* entry);

// The libtorch scalar type of a stored dtype (every DType has one).
at::ScalarType scalar_type_of(DType dtype);

}  // namespace draftlab
