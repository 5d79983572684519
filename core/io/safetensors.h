// safetensors reading (single file or sharded with model.safetensors.index.json) and writing.
// Format: 8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}, "__metadata__"},
// then the data. Every header field is validated against the file size before any byte is read.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/base/file_bytes.h"
#include "core/io/tensor_entry.h"

namespace draftlab {

class SafetensorsFile {
 public:
  // Maps and validates the file. Throws Error naming the path and the offending field:
  // header length past the end, JSON that does not parse, unknown dtype, shape/offset mismatch, overlapping
  // or out-of-range data_offsets.
  explicit SafetensorsFile(const std::string& path);

  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const TensorEntry* find(const std::string& name) const;  // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return bytes_.path(); }

 private:
  FileBytes bytes_;
  std::vector<TensorEntry> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a model: `path` is a .safetensors file, or a folder holding model.safetensors or
// model.safetensors.index.json (shards, each mapped once).
class SafetensorsCollection {
 public:
  explicit SafetensorsCollection(const std::string& path);

  const TensorEntry* find(const std::string& name) const;  // nullptr if absent
  // Throws Error "<files>: tensor '<name>' not found" when absent.
  const TensorEntry& get(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::string& description() const { return description_; }  // file or index path, for messages

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorEntry*> entries_;
  std::string description_;
};

// One tensor to write: raw little-endian bytes (nbytes must equal product(shape) * dtype_size(dtype)).
struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

// Writes a safetensors file atomically (temporary file, then rename). Tensors are written in the given order,
// header padded to 8 bytes as the reference implementation does.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace draftlab
