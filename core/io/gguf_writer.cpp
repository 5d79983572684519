#include "core/io/gguf_writer.h"

#include <algorithm>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/ggml_quant.h"

namespace draftlab {

namespace {

uint64_t padded(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// Bytes of `block` values of `type`: one value for the float types, 32 for the block-quantized ones.
size_t block_size(GgmlType type, int64_t* block) {
  *block = 1;
  if (type == kGgmlI64) return 8;
  switch (type) {
    case kGgmlF32: return 4;
    case kGgmlF16: return 2;
    case kGgmlBF16: return 2;
    case kGgmlQ8_0:
    case kGgmlQ4_0: *block = kGgmlQuantBlock; return ggml_quant_block_bytes(type);
  }
  return 0;
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw Error("GgufWriter: alignment must be a power of two, got " + std::to_string(alignment));
  if (alignment != kGgufDefaultAlignment) add("general.alignment", alignment);
}

void GgufWriter::begin_key(const std::string& key, GgufValueType type) {
  if (std::find(keys_.begin(), keys_.end(), key) != keys_.end())
    throw Error("GgufWriter: metadata key '" + key + "' added twice");
  keys_.push_back(key);
  ++kv_count_;
  put_string(key);
  put_scalar(static_cast<uint32_t>(type));
}

void GgufWriter::put_string(const std::string& s) {
  put_scalar(static_cast<uint64_t>(s.size()));
  metadata_ += s;
}

void GgufWriter::add_string(const std::string& key, const std::string& value) {
  begin_key(key, kGgufString);
  put_string(value);
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& values) {
  add_array(key, values);
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& shape,
                            const void* data, size_t nbytes) {
  int64_t block = 1;
  const size_t esize = block_size(type, &block);
  if (esize == 0) throw Error("GgufWriter: tensor " + name + ": unsupported type " + ggml_type_name(type));
  if (shape.empty() || shape.size() > 4)
    throw Error("GgufWriter: tensor " + name + ": expected 1 to 4 dimensions, got " + std::to_string(shape.size()));
  for (const auto& t : tensors_)
    if (t.name == name) throw Error("GgufWriter: tensor " + name + " added twice");
  uint64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("GgufWriter: tensor " + name + ": negative dimension in " + shape_string(shape));
    elements *= static_cast<uint64_t>(d);
  }
  if (shape.back() % block != 0)
    throw Error("GgufWriter: tensor " + name + ": rows of " + ggml_type_name(type) + " hold a multiple of " +
                std::to_string(block) + " values, got " + shape_string(shape));
  if (elements / block * esize != nbytes)
    throw Error("GgufWriter: tensor " + name + ": " + shape_string(shape) + " of " + ggml_type_name(type) +
                " is " + std::to_string(elements / block * esize) + " bytes, got " + std::to_string(nbytes));
  if (nbytes > 0 && !data) throw Error("GgufWriter: tensor " + name + ": null data");
  tensors_.push_back({name, type, shape, data, nbytes, data_size_});
  data_size_ += padded(nbytes, alignment_);
}

void GgufWriter::write(const std::string& path) const {
  std::string head;
  auto put = [&](auto v) { head.append(reinterpret_cast<const char*>(&v), sizeof v); };
  head += "GGUF";
  put(uint32_t{3});
  put(static_cast<uint64_t>(tensors_.size()));
  put(kv_count_);
  head += metadata_;
  for (const Tensor& t : tensors_) {
    put(static_cast<uint64_t>(t.name.size()));
    head += t.name;
    put(static_cast<uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) put(static_cast<uint64_t>(*d));  // ggml order
    put(static_cast<uint32_t>(t.type));
    put(t.offset);
  }
  const std::string zeros(alignment_, '\0');
  head.append(padded(head.size(), alignment_) - head.size(), '\0');

  TemporaryFile out(path);
  out.write(head.data(), head.size());
  for (const Tensor& t : tensors_) {
    out.write(t.data, t.nbytes);
    out.write(zeros.data(), padded(t.nbytes, alignment_) - t.nbytes);
  }
  out.commit();
}

}  // namespace draftlab
