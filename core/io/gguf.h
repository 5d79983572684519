// GGUF reader (llama.cpp's file format): header, key/value metadata of every type (arrays included), the tensor
// directory (names, shapes, offsets), and - through GgufTensorFile - the bytes of F32/F16/BF16 tensors.
// Spec: https://github.com/ggerganov/ggml/blob/master/docs/gguf.md ; the writer is core/io/gguf_writer.h.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/base/file_bytes.h"
#include "core/io/tensor_entry.h"

namespace draftlab {

// Metadata value types, numbered as stored in the file.
enum GgufValueType : uint32_t {
  kGgufU8 = 0,
  kGgufI8 = 1,
  kGgufU16 = 2,
  kGgufI16 = 3,
  kGgufU32 = 4,
  kGgufI32 = 5,
  kGgufF32 = 6,
  kGgufBool = 7,
  kGgufString = 8,
  kGgufArray = 9,
  kGgufU64 = 10,
  kGgufI64 = 11,
  kGgufF64 = 12,
};

// Tensor element types (ggml_type) that draftlab reads and writes: three float types and two block-quantized ones
// (core/io/ggml_quant.h); the other quantized formats are listed but not read.
enum GgmlType : uint32_t {
  kGgmlF32 = 0,
  kGgmlF16 = 1,
  kGgmlQ4_0 = 2,
  kGgmlQ8_0 = 8,
  kGgmlBF16 = 30,
};
// "F32", "F16", "Q4_0", ... for messages; "type 123" for numbers ggml does not define.
std::string ggml_type_name(uint32_t type);

// Data section alignment when general.alignment is absent (GGUF_DEFAULT_ALIGNMENT).
constexpr uint32_t kGgufDefaultAlignment = 32;

struct GgufValue;
using GgufArray = std::vector<GgufValue>;
struct GgufValue {
  // Integers of every width are widened to int64/uint64, floats to double.
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> v;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the innermost (contiguous) one, the reverse of PyTorch's
  uint32_t type = 0;
  uint64_t offset = 0;  // relative to the start of the data section
};

struct GgufFile {
  uint32_t version = 0;
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensorInfo> tensors;
  uint32_t alignment = kGgufDefaultAlignment;  // general.alignment
  uint64_t data_offset = 0;  // where the data section starts: after the tensor directory, padded to alignment

  // Typed accessors: throw Error naming the file, key and expected type when missing or mistyped.
  const std::string& get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;  // any integer type
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<double> get_float_array(const std::string& key) const;  // float32/float64 arrays
  std::vector<int64_t> get_int_array(const std::string& key) const;   // integer arrays
  bool has(const std::string& key) const { return metadata.count(key) != 0; }

  std::string path;
};

// Parses a GGUF file (v2 and v3). Bounds-checked: a truncated or lying file throws Error naming the path and
// what was being read; it never reads past the end. Tensor data is not looked at (vocabulary-only files and
// tensor directories without data parse).
GgufFile read_gguf(const std::string& path);

// A GGUF file mapped whole, with its tensors' bytes. Every F32/F16/BF16/Q8_0/Q4_0 tensor is checked on opening: its
// offset aligned and its bytes inside the file (a truncated file throws Error naming the path and the tensor).
// Q8_0 and Q4_0 tensors are entries of dtype F32 whose bytes are the file's blocks (TensorEntry::ggml_block_type):
// checkpoint_tensor dequantizes them (d * q is exact in float32), so a llama.cpp-quantized file loads as is.
// Tensors of other types are listed but not readable.
class GgufTensorFile {
 public:
  explicit GgufTensorFile(const std::string& path);
  const GgufFile& gguf() const { return gguf_; }
  bool has(const std::string& name) const;
  // The tensor by GGUF name, shape in PyTorch order (outermost first), or nullptr when absent. Throws Error naming
  // the file, the tensor and its type when the type is not F32, F16, BF16, Q8_0 or Q4_0.
  const TensorEntry* find(const std::string& name) const;
  // The ggml type the file stores a tensor in (before dequantization), or nullopt when absent.
  std::optional<uint32_t> stored_type(const std::string& name) const;

 private:
  FileBytes bytes_;
  GgufFile gguf_;
  std::map<std::string, TensorEntry> readable_;
  std::map<std::string, uint32_t> unreadable_;  // name -> ggml type
};

}  // namespace draftlab
