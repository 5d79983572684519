#include "core/base/dtype.h"

namespace draftlab {

namespace {

struct DTypeInfo {
  DType type;
  const char* name;  // as spelled in safetensors headers
  size_t size;       // bytes per element
};

// One table so name, size and parsing can never disagree.
constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "F32", 4}, {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2}, {DType::F64, "F64", 8},
    {DType::I64, "I64", 8}, {DType::I32, "I32", 4}, {DType::I16, "I16", 2},   {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},   {DType::BOOL, "BOOL", 1},
};

const DTypeInfo& info(DType t) {
  for (const DTypeInfo& d : kDTypes)
    if (d.type == t) return d;
  return kDTypes[0];  // unreachable: every enumerator is in the table
}

}  // namespace

size_t dtype_size(DType t) { return info(t).size; }

const char* dtype_name(DType t) { return info(t).name; }

bool parse_dtype(const std::string& name, DType* out) {
  for (const DTypeInfo& d : kDTypes) {
    if (name == d.name) {
      *out = d.type;
      return true;
    }
  }
  return false;
}

}  // namespace draftlab
