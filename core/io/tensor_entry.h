// A tensor inside a mapped checkpoint file: name, element type, shape and where its bytes are.
// Loaders produce these; core/model turns them into device tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/dtype.h"

namespace draftlab {

struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // points into a mapped file that outlives this entry
  size_t nbytes = 0;              // == product(shape) * dtype_size(dtype), validated by the loader (blocks: below)
  // Non-zero: `data` holds ggml blocks of this type (Q8_0 or Q4_0, core/io/ggml_quant.h; nbytes their size), which
  // readers dequantize to `dtype` F32 (checkpoint_tensor does).
  uint32_t ggml_block_type = 0;
  std::string file;               // which file it came from, for error messages
};

std::string shape_string(const std::vector<int64_t>& shape);  // "[4096, 11008]"

}  // namespace draftlab
