#include "core/model/checkpoint_tensor.h"

#include <cstring>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/ggml_quant.h"
#include "core/io/gguf.h"

namespace draftlab {

namespace {

// Model weights are floating point: F32, F16 or BF16.
at::ScalarType torch_dtype(const TensorEntry& e) {
  if (e.dtype != DType::F32 && e.dtype != DType::F16 && e.dtype != DType::BF16)
    throw Error::in_file(e.file, e.name + " dtype", "F32, F16 or BF16", dtype_name(e.dtype));
  return scalar_type_of(e.dtype);
}

}  // namespace

at::ScalarType scalar_type_of(DType t) {
  switch (t) {
    case DType::F32: return at::kFloat;
    case DType::F16: return at::kHalf;
    case DType::BF16: return at::kBFloat16;
    case DType::F64: return at::kDouble;
    case DType::I64: return at::kLong;
    case DType::I32: return at::kInt;
    case DType::I16: return at::kShort;
    case DType::I8: return at::kChar;
    case DType::U8: return at::kByte;
    case DType::BOOL: return at::kBool;
  }
  throw Error("scalar_type_of: a DType outside the enumeration");  // a corrupt value; the switch covers them all
}

WeightStorage checkpoint_storage(const TensorEntry* entry) {
  if (entry == nullptr) return WeightStorage::Float32;
  if (entry->dtype == DType::F16) return WeightStorage::Float16;
  if (entry->dtype == DType::BF16) return WeightStorage::BFloat16;
  if (entry->ggml_block_type == kGgmlQ8_0) return WeightStorage::Q8_0;
  if (entry->ggml_block_type == kGgmlQ4_0) return WeightStorage::Q4_0;
  return WeightStorage::Float32;
}

at::Tensor checkpoint_tensor(const TensorEntry& e, const std::vector<int64_t>& expected, const ComputeOptions& o,
                             const std::string& note) {
  if (e.shape != expected) throw Error::in_file(e.file, e.name + " shape", shape_string(expected) + note, shape_string(e.shape));
  auto t = at::empty(e.shape, at::TensorOptions().dtype(torch_dtype(e)));
  if (e.ggml_block_type != 0)
    dequantize_blocks(e.ggml_block_type, e.data, t.numel(), t.data_ptr<float>());  // Q8_0 / Q4_0 (GGUF)
  else if (e.nbytes)
    std::memcpy(t.data_ptr(), e.data, e.nbytes);
  forget_mapped_pages(e.data, e.nbytes);  // copied: the file's pages need not stay resident
  return t.to(o.device, o.dtype);
}

}  // namespace draftlab
