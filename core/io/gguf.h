// GGUF metadata reader (llama.cpp's file format), enough to read tokenizer vocabularies:
// header, key/value metadata of every type (arrays included), and the tensor directory (names, shapes, offsets).
// Tensor data is not interpreted. Spec: https://github.com/ggerganov/ggml/blob/master/docs/gguf.md
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace draftlab {

struct GgufValue;
using GgufArray = std::vector<GgufValue>;
struct GgufValue {
  // Integers of every width are widened to int64/uint64, floats to double.
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> v;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type = 0;
  uint64_t offset = 0;  // relative to the start of the data section
};

struct GgufFile {
  uint32_t version = 0;
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensorInfo> tensors;

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
// what was being read; it never reads past the end.
GgufFile read_gguf(const std::string& path);

}  // namespace draftlab
