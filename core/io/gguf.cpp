// GGUF reader: header, metadata key/values, the tensor directory and tensor data, every read bounds-checked.
//
// Layout (all little-endian), spec https://github.com/ggerganov/ggml/blob/master/docs/gguf.md :
//   "GGUF" | uint32 version | uint64 tensor_count | uint64 kv_count
//   kv_count x  { string key | uint32 value_type | value }
//   tensor_count x { string name | uint32 n_dims | n_dims x uint64 dim | uint32 ggml_type | uint64 offset }
// where string = uint64 length + bytes (no terminator), and an array value = uint32 element type, uint64 count,
// elements. Version 1 used 32-bit counts and lengths; it is long obsolete and rejected. The data section follows
// the directory, padded to general.alignment (default 32); each tensor's offset is relative to it and aligned.
#include "core/io/gguf.h"

#include <cstring>
#include <limits>
#include <map>
#include <type_traits>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/ggml_quant.h"

namespace draftlab {
namespace {

// The fewest bytes one value of `type` can occupy: lets a count be rejected before anything is allocated.
uint64_t min_encoded_size(uint32_t type) {
  switch (type) {
    case kGgufU8: case kGgufI8: case kGgufBool: return 1;
    case kGgufU16: case kGgufI16: return 2;
    case kGgufU32: case kGgufI32: case kGgufF32: return 4;
    case kGgufU64: case kGgufI64: case kGgufF64: return 8;
    case kGgufString: return 8;     // length, empty string
    case kGgufArray: return 4 + 8;  // element type + count, empty array
    default: return 1;
  }
}

// Arrays may nest (the spec allows arrays of arrays); a depth limit keeps a malicious file from exhausting the stack.
constexpr int kMaxArrayNesting = 8;
// ggml tensors have at most 4 dimensions (GGML_MAX_DIMS).
constexpr uint32_t kMaxTensorDims = 4;

// Sequential reader over the mapped file. Every read names what it is reading, so a truncated or lying file
// fails with "<path>: <what>: expected N bytes at offset X, got end of file at Y".
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, size_t size) : path_(path), data_(data), size_(size) {}

  uint64_t remaining() const { return size_ - pos_; }
  size_t position() const { return pos_; }

  template <typename T>
  T read(const std::string& what) {
    static_assert(std::is_trivially_copyable<T>::value, "plain values only");
    require(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string read_string(const std::string& what) {
    const uint64_t length = read<uint64_t>(what + " (string length)");
    require(length, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(length));
    pos_ += static_cast<size_t>(length);
    return s;
  }

  // Rejects a count whose elements could not fit in the rest of the file, before anything is allocated for it.
  void check_count(uint64_t count, uint64_t min_bytes_each, const std::string& what) const {
    if (count > remaining() / min_bytes_each)
      throw Error::in_file(path_, what,
                           "at most " + std::to_string(remaining() / min_bytes_each) + " (what the remaining " +
                               std::to_string(remaining()) + " bytes can hold)",
                           std::to_string(count));
  }

  [[noreturn]] void fail(const std::string& what, const std::string& expected, const std::string& got) const {
    throw Error::in_file(path_, what, expected, got);
  }

 private:
  void require(uint64_t n, const std::string& what) const {
    if (n > remaining())
      throw Error::in_file(path_, what,
                           std::to_string(n) + " bytes at offset " + std::to_string(pos_),
                           "end of file at " + std::to_string(size_) + " (file truncated or corrupt)");
  }

  const std::string& path_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

GgufValue read_value(Cursor& in, uint32_t type, const std::string& what, int nesting);

GgufValue read_array(Cursor& in, const std::string& what, int nesting) {
  if (nesting >= kMaxArrayNesting)
    in.fail(what, "arrays nested at most " + std::to_string(kMaxArrayNesting) + " deep", "deeper nesting");
  const uint32_t elem_type = in.read<uint32_t>(what + " (array element type)");
  if (elem_type > kGgufF64) in.fail(what + " (array element type)", "a GGUF type 0-12", std::to_string(elem_type));
  const uint64_t count = in.read<uint64_t>(what + " (array length)");
  in.check_count(count, min_encoded_size(elem_type), what + " (array length)");

  GgufArray elems;
  elems.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i)
    elems.push_back(read_value(in, elem_type, what + "[" + std::to_string(i) + "]", nesting + 1));
  return GgufValue{std::move(elems)};
}

GgufValue read_value(Cursor& in, uint32_t type, const std::string& what, int nesting) {
  switch (type) {
    case kGgufU8: return GgufValue{uint64_t{in.read<uint8_t>(what)}};
    case kGgufI8: return GgufValue{int64_t{in.read<int8_t>(what)}};
    case kGgufU16: return GgufValue{uint64_t{in.read<uint16_t>(what)}};
    case kGgufI16: return GgufValue{int64_t{in.read<int16_t>(what)}};
    case kGgufU32: return GgufValue{uint64_t{in.read<uint32_t>(what)}};
    case kGgufI32: return GgufValue{int64_t{in.read<int32_t>(what)}};
    case kGgufU64: return GgufValue{in.read<uint64_t>(what)};
    case kGgufI64: return GgufValue{in.read<int64_t>(what)};
    case kGgufF32: return GgufValue{double{in.read<float>(what)}};
    case kGgufF64: return GgufValue{in.read<double>(what)};
    case kGgufBool: {
      // Read as a byte: copying an arbitrary byte into a C++ bool is undefined behaviour.
      const uint8_t b = in.read<uint8_t>(what);
      if (b > 1) in.fail(what, "a bool (0 or 1)", std::to_string(b));
      return GgufValue{b == 1};
    }
    case kGgufString: return GgufValue{in.read_string(what)};
    case kGgufArray: return read_array(in, what, nesting);
    default: in.fail(what + " (value type)", "a GGUF type 0-12", std::to_string(type));
  }
}

GgufTensorInfo read_tensor_info(Cursor& in, uint64_t index) {
  const std::string what = "tensor info " + std::to_string(index);
  GgufTensorInfo info;
  info.name = in.read_string(what + " name");
  const std::string named = what + " (" + info.name + ")";
  const uint32_t n_dims = in.read<uint32_t>(named + " n_dims");
  if (n_dims > kMaxTensorDims)
    in.fail(named + " n_dims", "at most " + std::to_string(kMaxTensorDims), std::to_string(n_dims));
  for (uint32_t d = 0; d < n_dims; ++d) info.dims.push_back(in.read<uint64_t>(named + " dim " + std::to_string(d)));
  info.type = in.read<uint32_t>(named + " type");
  info.offset = in.read<uint64_t>(named + " offset");
  return info;
}

// Human-readable name of what a GgufValue holds, for "expected X, got Y" messages.
std::string held_type(const GgufValue& value) {
  switch (value.v.index()) {
    case 0: return "an unsigned integer";
    case 1: return "a signed integer";
    case 2: return "a float";
    case 3: return "a bool";
    case 4: return "a string";
    case 5: return "an array";
  }
  return "an unknown value";
}

// Integer of either signedness as int64 (nullopt-like false when `value` is not an integer or overflows).
bool as_int64(const GgufValue& value, int64_t* out) {
  if (const auto* u = std::get_if<uint64_t>(&value.v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(*u);
    return true;
  }
  if (const auto* i = std::get_if<int64_t>(&value.v)) {
    *out = *i;
    return true;
  }
  return false;
}

// The header and directory of the GGUF file `path` held in data[0, size).
GgufFile parse_gguf(const std::string& path, const uint8_t* data, size_t size) {
  Cursor in(path, data, size);

  const uint32_t magic = in.read<uint32_t>("magic");
  if (std::memcmp(&magic, "GGUF", 4) != 0) {
    std::string got(reinterpret_cast<const char*>(&magic), 4);
    for (char& c : got)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
    in.fail("magic", "\"GGUF\"", "\"" + got + "\" (not a GGUF file)");
  }

  GgufFile file;
  file.path = path;
  file.version = in.read<uint32_t>("version");
  if (file.version != 2 && file.version != 3)
    in.fail("version", "2 or 3", std::to_string(file.version));

  const uint64_t tensor_count = in.read<uint64_t>("tensor_count");
  const uint64_t kv_count = in.read<uint64_t>("metadata_kv_count");
  // Smallest possible entries: key "" + type + u8 value; tensor "" + n_dims 0 + type + offset.
  in.check_count(kv_count, 8 + 4 + 1, "metadata_kv_count");

  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = in.read_string("metadata key " + std::to_string(i));
    const uint32_t type = in.read<uint32_t>("metadata " + key + " value type");
    GgufValue value = read_value(in, type, "metadata " + key, 0);
    if (!file.metadata.emplace(key, std::move(value)).second)
      in.fail("metadata " + key, "each key once", "a duplicate key");
  }

  in.check_count(tensor_count, 8 + 4 + 4 + 8, "tensor_count");
  file.tensors.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) file.tensors.push_back(read_tensor_info(in, i));

  if (file.has("general.alignment")) {
    const int64_t alignment = file.get_int("general.alignment");
    // ggml requires a power of two; the cap only keeps the padding arithmetic far from overflow.
    if (alignment <= 0 || alignment > (int64_t{1} << 30) || (alignment & (alignment - 1)) != 0)
      in.fail("general.alignment", "a power of two", std::to_string(alignment));
    file.alignment = static_cast<uint32_t>(alignment);
  }
  file.data_offset = (in.position() + file.alignment - 1) / file.alignment * file.alignment;
  return file;
}

}  // namespace

std::string ggml_type_name(uint32_t type) {
  static const std::map<uint32_t, const char*> kNames = {
      {0, "F32"},      {1, "F16"},     {2, "Q4_0"},     {3, "Q4_1"},    {6, "Q5_0"},    {7, "Q5_1"},
      {8, "Q8_0"},     {9, "Q8_1"},    {10, "Q2_K"},    {11, "Q3_K"},   {12, "Q4_K"},   {13, "Q5_K"},
      {14, "Q6_K"},    {15, "Q8_K"},   {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"},
      {20, "IQ4_NL"},  {21, "IQ3_S"},  {22, "IQ2_S"},   {23, "IQ4_XS"}, {24, "I8"},     {25, "I16"},
      {26, "I32"},     {27, "I64"},    {28, "F64"},     {29, "IQ1_M"},  {30, "BF16"},   {34, "TQ1_0"},
      {35, "TQ2_0"}};
  const auto it = kNames.find(type);
  return it == kNames.end() ? "type " + std::to_string(type) : std::string(it->second) + " (" + std::to_string(type) + ")";
}

GgufFile read_gguf(const std::string& path) {
  FileBytes bytes(path);
  return parse_gguf(path, bytes.data(), bytes.size());
}

namespace {

// The element type of a readable tensor, false for the (quantized) others.
bool readable_dtype(uint32_t type, DType* out) {
  switch (type) {
    case kGgmlF32: *out = DType::F32; return true;
    case kGgmlF16: *out = DType::F16; return true;
    case kGgmlBF16: *out = DType::BF16; return true;
    default: return false;
  }
}

}  // namespace

GgufTensorFile::GgufTensorFile(const std::string& path)
    : bytes_(path), gguf_(parse_gguf(path, bytes_.data(), bytes_.size())) {
  const uint64_t size = bytes_.size();
  for (const GgufTensorInfo& info : gguf_.tensors) {
    const std::string field = "tensor " + info.name;
    if (readable_.count(info.name) || unreadable_.count(info.name))
      throw Error::in_file(path, field, "each tensor name once", "a duplicate name");
    TensorEntry e;
    const size_t block_bytes = ggml_quant_block_bytes(info.type);
    if (block_bytes == 0 && !readable_dtype(info.type, &e.dtype)) {
      unreadable_.emplace(info.name, info.type);
      continue;
    }
    e.name = info.name;
    e.file = path;
    if (block_bytes != 0) {
      e.dtype = DType::F32;  // what the blocks dequantize to
      e.ggml_block_type = info.type;
    }
    if (block_bytes != 0 && (info.dims.empty() || info.dims[0] % kGgmlQuantBlock != 0))
      throw Error::in_file(path, field + " shape", "rows of a multiple of 32 values for " + ggml_type_name(info.type),
                           info.dims.empty() ? std::string("no dimensions") : std::to_string(info.dims[0]));
    // Element count without overflow: each dimension below 2^62 / (elements so far).
    const uint64_t element_bytes = block_bytes != 0 ? 4 : dtype_size(e.dtype);
    uint64_t elements = 1;
    for (auto d = info.dims.rbegin(); d != info.dims.rend(); ++d) {
      constexpr uint64_t kMaxBytes = uint64_t{1} << 62;
      if (*d != 0 && elements > kMaxBytes / element_bytes / *d)
        throw Error::in_file(path, field + " shape", "a size that fits in memory", "dimensions whose product overflows");
      elements *= *d;
      e.shape.push_back(static_cast<int64_t>(*d));
    }
    e.nbytes = static_cast<size_t>(block_bytes != 0 ? elements / kGgmlQuantBlock * block_bytes
                                                    : elements * dtype_size(e.dtype));
    if (info.offset % gguf_.alignment != 0)
      throw Error::in_file(path, field + " offset", "a multiple of the alignment " + std::to_string(gguf_.alignment),
                           std::to_string(info.offset));
    // data_offset <= size is checked first so that the subtractions below cannot wrap.
    if (gguf_.data_offset > size || info.offset > size - gguf_.data_offset ||
        e.nbytes > size - gguf_.data_offset - info.offset)
      throw Error::in_file(path, field + " data",
                           std::to_string(e.nbytes) + " bytes at offset " +
                               std::to_string(gguf_.data_offset + info.offset),
                           "end of file at " + std::to_string(size) + " (file truncated or corrupt)");
    e.data = bytes_.data() + gguf_.data_offset + info.offset;
    readable_.emplace(info.name, std::move(e));
  }
}

bool GgufTensorFile::has(const std::string& name) const {
  return readable_.count(name) != 0 || unreadable_.count(name) != 0;
}

std::optional<uint32_t> GgufTensorFile::stored_type(const std::string& name) const {
  for (const GgufTensorInfo& info : gguf_.tensors)
    if (info.name == name) return info.type;
  return std::nullopt;
}

const TensorEntry* GgufTensorFile::find(const std::string& name) const {
  if (const auto it = unreadable_.find(name); it != unreadable_.end())
    throw Error::in_file(gguf_.path, "tensor " + name + " type",
                         "F32, F16, BF16, Q8_0 or Q4_0 (other quantized types are not read; llama-quantize --pure "
                         "writes Q8_0 / Q4_0 alone)",
                         ggml_type_name(it->second));
  const auto it = readable_.find(name);
  return it == readable_.end() ? nullptr : &it->second;
}

const std::string& GgufFile::get_string(const std::string& key) const {
  auto it = metadata.find(key);
  if (it == metadata.end()) throw Error::in_file(path, key, "a string", "no such key");
  const auto* s = std::get_if<std::string>(&it->second.v);
  if (!s) throw Error::in_file(path, key, "a string", held_type(it->second));
  return *s;
}

int64_t GgufFile::get_int(const std::string& key) const {
  auto it = metadata.find(key);
  if (it == metadata.end()) throw Error::in_file(path, key, "an integer", "no such key");
  int64_t value = 0;
  if (!as_int64(it->second, &value)) {
    const bool overflow = std::holds_alternative<uint64_t>(it->second.v);
    throw Error::in_file(path, key, "an integer",
                         overflow ? "an unsigned value above INT64_MAX" : held_type(it->second));
  }
  return value;
}

namespace {
// Looks up `key` as an array or throws naming the file, key and expected element type.
const GgufArray& get_array(const GgufFile& file, const std::string& key, const std::string& expected) {
  auto it = file.metadata.find(key);
  if (it == file.metadata.end()) throw Error::in_file(file.path, key, expected, "no such key");
  const auto* arr = std::get_if<GgufArray>(&it->second.v);
  if (!arr) throw Error::in_file(file.path, key, expected, held_type(it->second));
  return *arr;
}
}  // namespace

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufArray& arr = get_array(*this, key, "an array of strings");
  std::vector<std::string> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const auto* s = std::get_if<std::string>(&arr[i].v);
    if (!s) throw Error::in_file(path, key + "[" + std::to_string(i) + "]", "a string", held_type(arr[i]));
    out.push_back(*s);
  }
  return out;
}

std::vector<double> GgufFile::get_float_array(const std::string& key) const {
  const GgufArray& arr = get_array(*this, key, "an array of floats");
  std::vector<double> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const auto* d = std::get_if<double>(&arr[i].v);
    if (!d) throw Error::in_file(path, key + "[" + std::to_string(i) + "]", "a float", held_type(arr[i]));
    out.push_back(*d);
  }
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufArray& arr = get_array(*this, key, "an array of integers");
  std::vector<int64_t> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    int64_t value = 0;
    if (!as_int64(arr[i], &value))
      throw Error::in_file(path, key + "[" + std::to_string(i) + "]", "an integer (fitting int64)",
                           held_type(arr[i]));
    out.push_back(value);
  }
  return out;
}

}  // namespace draftlab
