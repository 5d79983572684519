#include "core/io/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/base/error.h"

namespace draftlab {

namespace {

using nlohmann::json;

constexpr const char* kMetadataKey = "__metadata__";
// The reference implementation (huggingface/safetensors) refuses headers above 100 MB; so do we, which also
// bounds the JSON parser's work on a hostile file.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string u64_le_bytes(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

// A JSON value for an error message: its type and (shortened) text.
std::string describe(const json& v) {
  std::string text = v.dump();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return std::string(v.type_name()) + " " + text;
}

std::string tensor_field(const std::string& name, const char* field) { return "'" + name + "'." + field; }

// product(shape) * element_size, or false on overflow.
bool byte_count(const std::vector<int64_t>& shape, size_t element_size, uint64_t* out) {
  uint64_t n = element_size;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  *out = n;
  return true;
}

// A parsed header entry plus where its bytes start inside the data section (for the overlap check).
struct ParsedEntry {
  TensorEntry entry;
  uint64_t begin = 0;
  uint64_t end = 0;
};

ParsedEntry parse_entry(const std::string& path, const std::string& name, const json& spec,
                        const uint8_t* data_section, uint64_t data_size) {
  if (!spec.is_object())
    throw Error::in_file(path, "'" + name + "'", "an object {dtype, shape, data_offsets}", describe(spec));

  ParsedEntry parsed;
  TensorEntry& e = parsed.entry;
  e.name = name;
  e.file = path;

  auto dtype_it = spec.find("dtype");
  if (dtype_it == spec.end() || !dtype_it->is_string())
    throw Error::in_file(path, tensor_field(name, "dtype"), "a dtype name such as \"F32\"",
                         dtype_it == spec.end() ? "nothing" : describe(*dtype_it));
  const std::string dtype_text = dtype_it->get<std::string>();
  if (!parse_dtype(dtype_text, &e.dtype))
    throw Error::in_file(path, tensor_field(name, "dtype"),
                         "one of F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL", "unknown dtype \"" + dtype_text + "\"");

  auto shape_it = spec.find("shape");
  if (shape_it == spec.end() || !shape_it->is_array())
    throw Error::in_file(path, tensor_field(name, "shape"), "an array of non-negative integers",
                         shape_it == spec.end() ? "nothing" : describe(*shape_it));
  for (const json& d : *shape_it) {
    // A non-negative JSON integer parses as number_unsigned; anything else (negative, float, text) is wrong.
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw Error::in_file(path, tensor_field(name, "shape"), "an array of non-negative integers", describe(*shape_it));
    e.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }

  auto offsets_it = spec.find("data_offsets");
  const std::string data_range = "[begin, end] with begin <= end <= " + std::to_string(data_size) + " (data section size)";
  if (offsets_it == spec.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned())
    throw Error::in_file(path, tensor_field(name, "data_offsets"), data_range,
                         offsets_it == spec.end() ? "nothing" : describe(*offsets_it));
  parsed.begin = (*offsets_it)[0].get<uint64_t>();
  parsed.end = (*offsets_it)[1].get<uint64_t>();
  if (parsed.begin > parsed.end || parsed.end > data_size)
    throw Error::in_file(path, tensor_field(name, "data_offsets"), data_range, describe(*offsets_it));

  uint64_t expected = 0;
  if (!byte_count(e.shape, dtype_size(e.dtype), &expected))
    throw Error::in_file(path, tensor_field(name, "shape"), "a shape whose byte count fits in 64 bits",
                         shape_string(e.shape));
  const uint64_t actual = parsed.end - parsed.begin;
  if (actual != expected)
    throw Error::in_file(path, tensor_field(name, "data_offsets"),
                         std::to_string(expected) + " bytes for shape " + shape_string(e.shape) + " of " + dtype_text,
                         std::to_string(actual) + " bytes " + describe(*offsets_it));

  e.data = data_section + parsed.begin;
  e.nbytes = static_cast<size_t>(actual);
  return parsed;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const json& value) {
  if (!value.is_object())
    throw Error::in_file(path, kMetadataKey, "an object of string values", describe(value));
  std::map<std::string, std::string> out;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!it.value().is_string())
      throw Error::in_file(path, std::string(kMetadataKey) + "." + it.key(), "a string", describe(it.value()));
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

// Tensors must not share bytes: a writer bug or a crafted file could otherwise alias two weights.
void check_no_overlap(const std::string& path, std::vector<ParsedEntry>* parsed) {
  std::sort(parsed->begin(), parsed->end(), [](const ParsedEntry& a, const ParsedEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const ParsedEntry* previous = nullptr;  // the latest-ending non-empty range seen so far
  for (const ParsedEntry& p : *parsed) {
    if (p.begin == p.end) continue;  // an empty tensor occupies no bytes
    if (previous && p.begin < previous->end)
      throw Error::in_file(path, tensor_field(p.entry.name, "data_offsets"),
                           "a range not overlapping '" + previous->entry.name + "' [" +
                               std::to_string(previous->begin) + ", " + std::to_string(previous->end) + ")",
                           "[" + std::to_string(p.begin) + ", " + std::to_string(p.end) + ")");
    if (!previous || p.end > previous->end) previous = &p;
  }
}

std::string join_path(const std::string& dir, const std::string& name) {
  return !dir.empty() && dir.back() == '/' ? dir + name : dir + "/" + name;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// SafetensorsFile

SafetensorsFile::SafetensorsFile(const std::string& path) : bytes_(path) {
  const uint64_t file_size = bytes_.size();
  if (file_size < 8)
    throw Error::in_file(path, "header length", "an 8-byte little-endian header length",
                         "a file of " + std::to_string(file_size) + " bytes");
  const uint64_t header_length = read_u64_le(bytes_.data());
  if (header_length > file_size - 8)
    throw Error::in_file(path, "header length", "at most " + std::to_string(file_size - 8) + " (file size - 8)",
                         std::to_string(header_length));
  if (header_length > kMaxHeaderBytes)
    throw Error::in_file(path, "header length", "at most " + std::to_string(kMaxHeaderBytes) + " bytes",
                         std::to_string(header_length));

  const char* header_text = reinterpret_cast<const char*>(bytes_.data() + 8);
  json header;
  try {
    header = json::parse(header_text, header_text + header_length);
  } catch (const json::exception& e) {
    throw Error::in_file(path, "header", "valid JSON", e.what());
  }
  if (!header.is_object()) throw Error::in_file(path, "header", "a JSON object", describe(header));

  const uint8_t* data_section = bytes_.data() + 8 + header_length;
  const uint64_t data_size = file_size - 8 - header_length;

  std::vector<ParsedEntry> parsed;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == kMetadataKey)
      metadata_ = parse_metadata(path, it.value());
    else
      parsed.push_back(parse_entry(path, it.key(), it.value(), data_section, data_size));
  }
  check_no_overlap(path, &parsed);  // also leaves `parsed` in file order, which is the order we expose

  tensors_.reserve(parsed.size());
  for (ParsedEntry& p : parsed) {
    index_[p.entry.name] = tensors_.size();
    tensors_.push_back(std::move(p.entry));
  }
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

// ---------------------------------------------------------------------------------------------------------------
// SafetensorsCollection

SafetensorsCollection::SafetensorsCollection(const std::string& path) {
  auto add_file = [this](const std::string& file) -> const SafetensorsFile& {
    files_.push_back(std::make_unique<SafetensorsFile>(file));
    const SafetensorsFile& f = *files_.back();
    for (const TensorEntry& e : f.tensors()) {
      auto [it, inserted] = entries_.emplace(e.name, &e);
      if (!inserted)
        throw Error::at(description_, "tensor '" + e.name + "' appears in both " + it->second->file + " and " + file);
    }
    return f;
  };

  if (is_file(path)) {
    description_ = path;
    add_file(path);
    return;
  }
  if (!is_directory(path)) throw Error::at(path, "no such safetensors file or folder");

  const std::string index_path = join_path(path, "model.safetensors.index.json");
  const std::string single_path = join_path(path, "model.safetensors");
  if (!is_file(index_path)) {
    if (!is_file(single_path))
      throw Error::at(path, "folder holds neither model.safetensors nor model.safetensors.index.json");
    description_ = single_path;
    add_file(single_path);
    return;
  }

  // Sharded: {"weight_map": {tensor name: shard file name}}. Each shard is mapped once.
  description_ = index_path;
  json index;
  try {
    index = json::parse(read_text_file(index_path));
  } catch (const json::exception& e) {
    throw Error::in_file(index_path, "index", "valid JSON", e.what());
  }
  auto map_it = index.is_object() ? index.find("weight_map") : index.end();
  if (!index.is_object() || map_it == index.end() || !map_it->is_object())
    throw Error::in_file(index_path, "weight_map", "an object {tensor name: shard file}",
                         map_it == index.end() ? "nothing" : describe(*map_it));

  std::map<std::string, const SafetensorsFile*> shards;  // shard file name -> mapped file
  for (auto it = map_it->begin(); it != map_it->end(); ++it) {
    if (!it.value().is_string())
      throw Error::in_file(index_path, "weight_map." + it.key(), "a shard file name", describe(it.value()));
    const std::string shard = it.value().get<std::string>();
    if (shards.count(shard)) continue;
    const std::string shard_path = join_path(path, shard);
    if (!is_file(shard_path))
      throw Error::at(index_path, "shard " + shard_path + " (named for tensor '" + it.key() + "') does not exist");
    shards[shard] = &add_file(shard_path);
  }
  // Every tensor the index promises must be in the shard it names.
  for (auto it = map_it->begin(); it != map_it->end(); ++it) {
    const SafetensorsFile* shard = shards.at(it.value().get<std::string>());
    if (!shard->find(it.key()))
      throw Error::at(index_path, "tensor '" + it.key() + "' is not in its shard " + shard->path());
  }
}

const TensorEntry* SafetensorsCollection::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second;
}

const TensorEntry& SafetensorsCollection::get(const std::string& name) const {
  const TensorEntry* e = find(name);
  if (!e) throw Error::at(description_, "tensor '" + name + "' not found");
  return *e;
}

std::vector<std::string> SafetensorsCollection::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& kv : entries_) out.push_back(kv.first);
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Writing

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps tensors in the order given, so the header reads in data order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& kv : metadata) meta[kv.first] = kv.second;
    header[kMetadataKey] = meta;
  }

  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == kMetadataKey)
      throw Error::in_file(path, "tensor name", "a non-empty name other than __metadata__", "\"" + t.name + "\"");
    if (!seen.insert(t.name).second)
      throw Error::in_file(path, "tensor name", "unique names", "'" + t.name + "' twice");
    uint64_t expected = 0;
    if (!byte_count(t.shape, dtype_size(t.dtype), &expected))
      throw Error::in_file(path, tensor_field(t.name, "shape"), "non-negative dimensions", shape_string(t.shape));
    if (t.nbytes != expected)
      throw Error::in_file(path, tensor_field(t.name, "nbytes"),
                           std::to_string(expected) + " for shape " + shape_string(t.shape) + " of " +
                               dtype_name(t.dtype),
                           std::to_string(t.nbytes));
    if (t.nbytes > 0 && !t.data)
      throw Error::in_file(path, tensor_field(t.name, "data"), "a pointer to the bytes", "null");
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }

  // Pad with spaces so the data section starts 8-byte aligned (the 8-byte length prefix keeps it so).
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  TemporaryFile out(path);
  const std::string length = u64_le_bytes(header_text.size());
  out.write(length.data(), length.size());
  out.write(header_text.data(), header_text.size());
  for (const TensorToWrite& t : tensors) out.write(t.data, t.nbytes);
  out.commit();
}

}  // namespace draftlab
