// Element types of checkpoint tensors (safetensors names), independent of libtorch.
#pragma once

#include <cstddef>
#include <string>

namespace draftlab {

enum class DType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "F32", "F16", "BF16", ... as in safetensors headers
// Parses a safetensors dtype string; returns false for unknown names.
bool parse_dtype(const std::string& name, DType* out);

}  // namespace draftlab
