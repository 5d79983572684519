// GgufWriter - writes GGUF v3 files (llama.cpp's format; read back by core/io/gguf.h).
//
// Metadata values keep the exact GGUF type they are added with (llama.cpp reads llama.context_length as uint32,
// tokenizer.ggml.scores as float32, ...: the type is part of the format, so the caller names it). Tensors are
// given as raw little-endian bytes with a PyTorch-order shape (outermost first); the directory stores the dims
// reversed, in ggml order. Layout and alignment follow the peer's gguf-py writer:
//   header | metadata | tensor directory | zero padding to `alignment` | each tensor, padded to `alignment`
// with tensor offsets relative to the data section. write() is atomic: a temporary file renamed into place,
// removed on any error, so a failed export never leaves a partial file.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/io/gguf.h"

namespace draftlab {

// ggml's I64 element type: written only (an EAGLE-3 head's d2t, strategies/eagle3/eagle3_gguf.h), never read.
constexpr GgmlType kGgmlI64 = static_cast<GgmlType>(27);

class GgufWriter {
 public:
  // A non-default alignment (a power of two) is recorded as general.alignment, as GGUF requires.
  explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment);

  // Scalars: T is one of uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, uint64_t, int64_t, float,
  // double, bool; the GGUF type follows from it. Keys must be unique (Error otherwise, as in the reader).
  template <typename T>
  void add(const std::string& key, T value) {
    static_assert(type_of<T>() != kGgufString, "add_string for strings");
    begin_key(key, type_of<T>());
    put_scalar(value);
  }
  void add_string(const std::string& key, const std::string& value);

  // Arrays of one scalar type or of strings (arrays of arrays are legal GGUF, but nothing written here needs them).
  template <typename T>
  void add_array(const std::string& key, const std::vector<T>& values) {
    begin_key(key, kGgufArray);
    put_scalar(static_cast<uint32_t>(type_of<T>()));
    put_scalar(static_cast<uint64_t>(values.size()));
    for (const T& v : values) put_scalar(static_cast<T>(v));  // (vector<bool> yields proxies, hence the cast)
  }
  void add_string_array(const std::string& key, const std::vector<std::string>& values);

  // A tensor of `type` (kGgmlF32 / kGgmlF16 / kGgmlBF16, or kGgmlQ8_0 / kGgmlQ4_0 blocks of 32 values along the
  // innermost dimension) with `shape` in PyTorch order. The bytes are copied at write(), so `data` must stay valid
  // until then. nbytes must equal what the type stores for that many elements.
  void add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& shape, const void* data,
                  size_t nbytes);

  // Writes the file atomically. Throws Error naming `path` when it cannot be written.
  void write(const std::string& path) const;

  size_t tensor_count() const { return tensors_.size(); }

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    const void* data;
    size_t nbytes;
    uint64_t offset;  // within the data section
  };

  template <typename T>
  static constexpr GgufValueType type_of() {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_same_v<U, uint8_t>) return kGgufU8;
    else if constexpr (std::is_same_v<U, int8_t>) return kGgufI8;
    else if constexpr (std::is_same_v<U, uint16_t>) return kGgufU16;
    else if constexpr (std::is_same_v<U, int16_t>) return kGgufI16;
    else if constexpr (std::is_same_v<U, uint32_t>) return kGgufU32;
    else if constexpr (std::is_same_v<U, int32_t>) return kGgufI32;
    else if constexpr (std::is_same_v<U, float>) return kGgufF32;
    else if constexpr (std::is_same_v<U, bool>) return kGgufBool;
    else if constexpr (std::is_same_v<U, uint64_t>) return kGgufU64;
    else if constexpr (std::is_same_v<U, int64_t>) return kGgufI64;
    else if constexpr (std::is_same_v<U, double>) return kGgufF64;
    else if constexpr (std::is_same_v<U, std::string>) return kGgufString;
    else static_assert(sizeof(T) == 0, "not a GGUF metadata type");
  }

  void begin_key(const std::string& key, GgufValueType type);
  void put_string(const std::string& s);
  template <typename T>
  void put_scalar(T v) {
    if constexpr (std::is_same_v<T, bool>) {
      metadata_.push_back(v ? 1 : 0);
    } else {
      metadata_.append(reinterpret_cast<const char*>(&v), sizeof v);  // little-endian hosts only (x86, ARM)
    }
  }
  void put_scalar(const std::string& s) { put_string(s); }

  uint32_t alignment_;
  uint64_t kv_count_ = 0;
  std::string metadata_;  // the encoded key/value pairs
  std::vector<std::string> keys_;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;  // the data section so far, padded
};

}  // namespace draftlab
