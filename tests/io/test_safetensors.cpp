// safetensors: writer/reader round trip, hand-made files of every dtype, sharded folders, and malformed files
// that must fail with an Error naming the file and the offending field.
#include "test_errors.h"
#include "core/io/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>

#include "core/base/error.h"
#include "test_paths.h"

namespace draftlab {
namespace {

std::string scratch(const std::string& name) { return testing::temp_dir() + "/" + name; }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string le64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

// A safetensors file assembled by hand: length prefix, header text exactly as given, data bytes.
std::string st_bytes(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

std::string entry_bytes(const TensorEntry& e) { return std::string(reinterpret_cast<const char*>(e.data), e.nbytes); }

// A hand-made file with one tensor "t" and the given header entry; returns its path.
std::string one_tensor_file(const std::string& file_name, const std::string& entry_json, const std::string& data) {
  const std::string path = scratch(file_name);
  write_bytes(path, st_bytes("{\"t\":" + entry_json + "}", data));
  return path;
}

TEST(Safetensors, RoundTripOfF32F16Bf16I64KeepsBytesShapesAndOrder) {
  const std::vector<float> f32 = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 42.0f};
  const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x3800, 0x7BFF};  // 1, -2, 0.5, 65504
  const std::vector<uint16_t> bf16 = {0x3F80, 0xBF80, 0x4049, 0x0000};  // 1, -1, 3.140625, 0
  const std::vector<int64_t> i64 = {-1, 0, int64_t{1} << 40};
  const std::vector<TensorToWrite> tensors = {
      {"model.embed_tokens.weight", DType::F32, {2, 3}, f32.data(), f32.size() * 4},
      {"half", DType::F16, {4}, f16.data(), f16.size() * 2},
      {"brain", DType::BF16, {2, 2}, bf16.data(), bf16.size() * 2},
      {"ids", DType::I64, {3}, i64.data(), i64.size() * 8},
      {"empty", DType::F32, {0, 5}, nullptr, 0},
  };
  const std::string path = scratch("roundtrip.safetensors");
  write_safetensors(path, tensors, {{"format", "pt"}, {"source", "draftlab test"}});

  // The header is padded to a multiple of 8, so the data section is 8-byte aligned.
  const std::string raw = read_bytes(path);
  ASSERT_GE(raw.size(), 8u);
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | static_cast<uint8_t>(raw[i]);
  EXPECT_EQ(header_length % 8, 0u);
  EXPECT_EQ(raw.size(), 8 + header_length + 24 + 8 + 8 + 24);
  EXPECT_FALSE(testing::exists(path + ".tmp." + std::to_string(::getpid())));

  SafetensorsFile file(path);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorEntry& e = file.tensors()[i];  // file order == the order written
    EXPECT_EQ(e.name, tensors[i].name);
    EXPECT_EQ(e.dtype, tensors[i].dtype);
    EXPECT_EQ(e.shape, tensors[i].shape);
    EXPECT_EQ(e.file, path);
    ASSERT_EQ(e.nbytes, tensors[i].nbytes);
    if (e.nbytes) EXPECT_EQ(std::memcmp(e.data, tensors[i].data, e.nbytes), 0) << e.name;
  }
  ASSERT_NE(file.find("ids"), nullptr);
  int64_t third = 0;
  std::memcpy(&third, file.find("ids")->data + 16, 8);
  EXPECT_EQ(third, int64_t{1} << 40);
  EXPECT_EQ(file.find("absent"), nullptr);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("source"), "draftlab test");
}

TEST(Safetensors, HandMadeFilesOfEveryDtypeParseToTheirBytes) {
  struct Case {
    const char* dtype;
    DType type;
    std::string data;  // little-endian bytes of a [2] tensor
  };
  const std::vector<Case> cases = {
      {"F32", DType::F32, std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8)},  // 1.0, -2.0
      {"F16", DType::F16, std::string("\x00\x3c\x00\xc0", 4)},                  // 1.0, -2.0
      {"BF16", DType::BF16, std::string("\x80\x3f\x00\xc0", 4)},                // 1.0, -2.0
      {"F64", DType::F64, std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x00\x00\x00\x00\x00\x00\xc0", 16)},
      {"I64", DType::I64, std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x07\x00\x00\x00\x00\x00\x00\x00", 16)},
      {"I32", DType::I32, std::string("\xff\xff\xff\xff\x07\x00\x00\x00", 8)},
      {"I16", DType::I16, std::string("\xff\xff\x07\x00", 4)},
      {"I8", DType::I8, std::string("\xff\x07", 2)},
      {"U8", DType::U8, std::string("\xff\x07", 2)},
      {"BOOL", DType::BOOL, std::string("\x01\x00", 2)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dtype);
    const std::string entry = std::string("{\"dtype\":\"") + c.dtype + "\",\"shape\":[2],\"data_offsets\":[0," +
                              std::to_string(c.data.size()) + "]}";
    const std::string path = one_tensor_file(std::string("dtype_") + c.dtype + ".safetensors", entry, c.data);
    SafetensorsFile file(path);
    ASSERT_EQ(file.tensors().size(), 1u);
    const TensorEntry& e = file.tensors()[0];
    EXPECT_EQ(e.name, "t");
    EXPECT_EQ(e.dtype, c.type);
    EXPECT_EQ(dtype_name(e.dtype), std::string(c.dtype));
    EXPECT_EQ(e.shape, (std::vector<int64_t>{2}));
    EXPECT_EQ(entry_bytes(e), c.data);
  }
  float values[2];
  SafetensorsFile f32(scratch("dtype_F32.safetensors"));
  std::memcpy(values, f32.tensors()[0].data, 8);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[1], -2.0f);
}

TEST(Safetensors, HandMadeFileWithMetadataAndOutOfNameOrderOffsets) {
  // "b" comes first in the data even though "a" sorts first by name; trailing spaces pad the header, as writers do.
  const std::string header =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
      "\"a\":{\"dtype\":\"I32\",\"shape\":[1,1],\"data_offsets\":[2,6]}}   ";
  const std::string data = std::string("\x07\x08", 2) + std::string("\x04\x03\x02\x01", 4);
  const std::string path = scratch("handmade_two.safetensors");
  write_bytes(path, st_bytes(header, data));

  SafetensorsFile file(path);
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[0].name, "b");  // file order
  EXPECT_EQ(file.tensors()[1].name, "a");
  EXPECT_EQ(entry_bytes(*file.find("b")), std::string("\x07\x08", 2));
  int32_t a = 0;
  std::memcpy(&a, file.find("a")->data, 4);
  EXPECT_EQ(a, 0x01020304);
  EXPECT_EQ(file.find("a")->shape, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(file.metadata().size(), 1u);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.find("__metadata__"), nullptr);
}

// ---------------------------------------------------------------------------------------------------------------
// Collections: single file, folder with model.safetensors, sharded folder.

std::string make_dir(const std::string& name) {
  const std::string dir = scratch(name);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

TEST(SafetensorsCollection, ShardedFolderMapsEachTensorToItsShard) {
  const std::string dir = make_dir("sharded");
  const std::vector<float> a = {1, 2, 3, 4}, b = {5, 6}, c = {7};
  write_safetensors(dir + "/model-00001-of-00002.safetensors",
                    {{"model.layers.0.mlp.up_proj.weight", DType::F32, {2, 2}, a.data(), 16},
                     {"model.norm.weight", DType::F32, {2}, b.data(), 8}});
  write_safetensors(dir + "/model-00002-of-00002.safetensors", {{"lm_head.weight", DType::F32, {1, 1}, c.data(), 4}});
  write_bytes(dir + "/model.safetensors.index.json",
              R"({"metadata": {"total_size": 28}, "weight_map": {
                   "model.layers.0.mlp.up_proj.weight": "model-00001-of-00002.safetensors",
                   "model.norm.weight": "model-00001-of-00002.safetensors",
                   "lm_head.weight": "model-00002-of-00002.safetensors"}})");

  SafetensorsCollection all(dir);
  EXPECT_EQ(all.description(), dir + "/model.safetensors.index.json");
  EXPECT_EQ(all.names(), (std::vector<std::string>{"lm_head.weight", "model.layers.0.mlp.up_proj.weight",
                                                   "model.norm.weight"}));
  const TensorEntry& head = all.get("lm_head.weight");
  EXPECT_EQ(head.file, dir + "/model-00002-of-00002.safetensors");
  float v = 0;
  std::memcpy(&v, head.data, 4);
  EXPECT_EQ(v, 7.0f);
  std::memcpy(&v, all.get("model.norm.weight").data + 4, 4);
  EXPECT_EQ(v, 6.0f);
  EXPECT_EQ(all.find("model.embed_tokens.weight"), nullptr);
  draftlab::testing::expect_error([&] { all.get("model.embed_tokens.weight"); },
               {dir + "/model.safetensors.index.json", "'model.embed_tokens.weight'", "not found"});
}

TEST(SafetensorsCollection, FolderWithSingleFileAndPlainFilePath) {
  const std::string dir = make_dir("single");
  const std::vector<float> w = {0.5f, 0.25f};
  write_safetensors(dir + "/model.safetensors", {{"w", DType::F32, {2}, w.data(), 8}});
  SafetensorsCollection from_dir(dir);
  EXPECT_EQ(from_dir.description(), dir + "/model.safetensors");
  EXPECT_EQ(from_dir.names(), std::vector<std::string>{"w"});
  SafetensorsCollection from_file(dir + "/model.safetensors");
  EXPECT_EQ(entry_bytes(from_file.get("w")), std::string(reinterpret_cast<const char*>(w.data()), 8));

  const std::string empty_dir = make_dir("no_model");
  draftlab::testing::expect_error([&] { SafetensorsCollection c(empty_dir); }, {empty_dir, "model.safetensors"});
}

TEST(SafetensorsCollection, MissingShardIsAnErrorNamingIndexAndShard) {
  const std::string dir = make_dir("missing_shard");
  const std::vector<float> a = {1};
  write_safetensors(dir + "/model-00001-of-00002.safetensors", {{"a", DType::F32, {1}, a.data(), 4}});
  write_bytes(dir + "/model.safetensors.index.json",
              R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  draftlab::testing::expect_error([&] { SafetensorsCollection c(dir); },
               {dir + "/model.safetensors.index.json", "model-00002-of-00002.safetensors", "'b'"});
}

TEST(SafetensorsCollection, IndexNamingATensorItsShardLacksIsAnError) {
  const std::string dir = make_dir("lying_index");
  const std::vector<float> a = {1};
  write_safetensors(dir + "/shard.safetensors", {{"a", DType::F32, {1}, a.data(), 4}});
  write_bytes(dir + "/model.safetensors.index.json", R"({"weight_map": {"a": "shard.safetensors", "z": "shard.safetensors"}})");
  draftlab::testing::expect_error([&] { SafetensorsCollection c(dir); }, {"model.safetensors.index.json", "'z'", "shard.safetensors"});

  write_bytes(dir + "/model.safetensors.index.json", R"({"weight_map": ["a"]})");
  draftlab::testing::expect_error([&] { SafetensorsCollection c(dir); }, {"model.safetensors.index.json", "weight_map"});
}

// ---------------------------------------------------------------------------------------------------------------
// Malformed files: each throws Error naming the path and the field.

TEST(SafetensorsErrors, TruncatedFiles) {
  const std::vector<float> w = {1, 2, 3, 4};
  const std::string good = scratch("good.safetensors");
  write_safetensors(good, {{"w", DType::F32, {4}, w.data(), 16}});
  const std::string bytes = read_bytes(good);

  const std::string cut_data = scratch("truncated_data.safetensors");
  write_bytes(cut_data, bytes.substr(0, bytes.size() - 4));
  draftlab::testing::expect_error([&] { SafetensorsFile f(cut_data); }, {cut_data, "'w'.data_offsets", "[0,16]"});

  const std::string cut_header = scratch("truncated_header.safetensors");
  write_bytes(cut_header, bytes.substr(0, 20));
  draftlab::testing::expect_error([&] { SafetensorsFile f(cut_header); }, {cut_header, "header length"});

  const std::string cut_length = scratch("truncated_length.safetensors");
  write_bytes(cut_length, bytes.substr(0, 5));
  draftlab::testing::expect_error([&] { SafetensorsFile f(cut_length); }, {cut_length, "header length", "5 bytes"});
}

TEST(SafetensorsErrors, HeaderLengthLying) {
  const std::string path = scratch("lying_length.safetensors");
  const std::string header = R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  write_bytes(path, le64(uint64_t{1} << 62) + header + "x");
  draftlab::testing::expect_error([&] { SafetensorsFile f(path); }, {path, "header length", std::to_string(uint64_t{1} << 62)});
  // One byte too long: the length reaches past the end of the file.
  write_bytes(path, le64(header.size() + 2) + header + "x");
  draftlab::testing::expect_error([&] { SafetensorsFile f(path); }, {path, "header length"});
}

TEST(SafetensorsErrors, BadJsonAndWrongShapes) {
  const std::string path = scratch("bad_json.safetensors");
  write_bytes(path, st_bytes("{\"t\": {\"dtype\": ", ""));
  draftlab::testing::expect_error([&] { SafetensorsFile f(path); }, {path, "header", "valid JSON"});

  write_bytes(path, st_bytes("[1, 2]", ""));
  draftlab::testing::expect_error([&] { SafetensorsFile f(path); }, {path, "header", "object"});

  write_bytes(path, st_bytes("{\"t\": 5}", ""));
  draftlab::testing::expect_error([&] { SafetensorsFile f(path); }, {path, "'t'", "object"});

  write_bytes(path, st_bytes(R"({"__metadata__": {"format": 1}})", ""));
  draftlab::testing::expect_error([&] { SafetensorsFile f(path); }, {path, "__metadata__.format", "string"});
}

TEST(SafetensorsErrors, UnknownDtypeIsNamed) {
  const std::string path = one_tensor_file("unknown_dtype.safetensors",
                                           R"({"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]})", "ab");
  draftlab::testing::expect_error([&] { SafetensorsFile f(path); }, {path, "'t'.dtype", "F8_E4M3"});
  const std::string missing = one_tensor_file("missing_dtype.safetensors", R"({"shape":[2],"data_offsets":[0,2]})", "ab");
  draftlab::testing::expect_error([&] { SafetensorsFile f(missing); }, {missing, "'t'.dtype"});
}

TEST(SafetensorsErrors, NegativeOrNonIntegerShape) {
  const std::string negative = one_tensor_file("negative_shape.safetensors",
                                               R"({"dtype":"U8","shape":[-1,2],"data_offsets":[0,2]})", "ab");
  draftlab::testing::expect_error([&] { SafetensorsFile f(negative); }, {negative, "'t'.shape", "non-negative"});
  const std::string fractional = one_tensor_file("float_shape.safetensors",
                                                 R"({"dtype":"U8","shape":[1.5],"data_offsets":[0,2]})", "ab");
  draftlab::testing::expect_error([&] { SafetensorsFile f(fractional); }, {fractional, "'t'.shape"});
  const std::string huge = one_tensor_file(
      "huge_shape.safetensors", R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,2]})", "ab");
  draftlab::testing::expect_error([&] { SafetensorsFile f(huge); }, {huge, "'t'.shape"});
}

TEST(SafetensorsErrors, OffsetsOutOfRangeOrMalformed) {
  const std::string past_end = one_tensor_file("offsets_past_end.safetensors",
                                               R"({"dtype":"U8","shape":[100],"data_offsets":[0,100]})", "abcdefgh");
  draftlab::testing::expect_error([&] { SafetensorsFile f(past_end); }, {past_end, "'t'.data_offsets", "<= 8"});
  const std::string reversed = one_tensor_file("offsets_reversed.safetensors",
                                               R"({"dtype":"U8","shape":[0],"data_offsets":[4,0]})", "abcdefgh");
  draftlab::testing::expect_error([&] { SafetensorsFile f(reversed); }, {reversed, "'t'.data_offsets"});
  const std::string three = one_tensor_file("offsets_three.safetensors",
                                            R"({"dtype":"U8","shape":[2],"data_offsets":[0,1,2]})", "ab");
  draftlab::testing::expect_error([&] { SafetensorsFile f(three); }, {three, "'t'.data_offsets"});
  const std::string negative = one_tensor_file("offsets_negative.safetensors",
                                               R"({"dtype":"U8","shape":[2],"data_offsets":[-2,0]})", "ab");
  draftlab::testing::expect_error([&] { SafetensorsFile f(negative); }, {negative, "'t'.data_offsets"});
  const std::string missing = one_tensor_file("offsets_missing.safetensors", R"({"dtype":"U8","shape":[2]})", "ab");
  draftlab::testing::expect_error([&] { SafetensorsFile f(missing); }, {missing, "'t'.data_offsets"});
}

TEST(SafetensorsErrors, ShapeAndByteCountMismatch) {
  // F32 [3] needs 12 bytes; the offsets give 8.
  const std::string path = one_tensor_file("size_mismatch.safetensors",
                                           R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", "abcdefgh");
  draftlab::testing::expect_error([&] { SafetensorsFile f(path); }, {path, "'t'.data_offsets", "12 bytes", "[3]", "F32", "8 bytes"});
}

TEST(SafetensorsErrors, OverlappingTensors) {
  const std::string path = scratch("overlap.safetensors");
  write_bytes(path, st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                             std::string(12, 'x')));
  draftlab::testing::expect_error([&] { SafetensorsFile f(path); }, {path, "'b'.data_offsets", "'a'"});
  // An identical range is an overlap too; an empty tensor anywhere is not.
  write_bytes(path, st_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},)"
                             R"("c":{"dtype":"F32","shape":[0],"data_offsets":[2,2]}})",
                             std::string(4, 'x')));
  draftlab::testing::expect_error([&] { SafetensorsFile f(path); }, {path, ".data_offsets", "overlapping"});
  write_bytes(path, st_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                             R"("c":{"dtype":"F32","shape":[0],"data_offsets":[2,2]}})",
                             std::string(4, 'x')));
  SafetensorsFile ok(path);
  EXPECT_EQ(ok.tensors().size(), 2u);
}

TEST(SafetensorsErrors, WriterRejectsInconsistentTensorsAndLeavesNoFile) {
  const std::string path = scratch("never_written.safetensors");
  const std::vector<float> w = {1, 2, 3};
  draftlab::testing::expect_error([&] { write_safetensors(path, {{"w", DType::F32, {2, 2}, w.data(), 12}}); }, {path, "'w'.nbytes", "16"});
  draftlab::testing::expect_error([&] { write_safetensors(path, {{"w", DType::F32, {3}, w.data(), 12}, {"w", DType::F32, {3}, w.data(), 12}}); },
               {path, "'w' twice"});
  draftlab::testing::expect_error([&] { write_safetensors(path, {{"__metadata__", DType::F32, {3}, w.data(), 12}}); }, {path, "tensor name"});
  EXPECT_FALSE(testing::exists(path));
  EXPECT_FALSE(testing::exists(path + ".tmp." + std::to_string(::getpid())));
  draftlab::testing::expect_error([&] { write_safetensors(scratch("no/such/dir.safetensors"), {}); }, {"no/such/dir.safetensors"});
}

// A writer killed mid-write leaves PATH.tmp.PID behind (tests/cli/test_crash_safety.sh kills them): the next write
// of PATH removes those whose process is gone, and keeps a running process's (it may be writing it now), other
// files' temporaries and names that are not a temporary.
TEST(Safetensors, WriteRemovesTheTemporariesOfKilledWriters) {
  const std::string dir = testing::fresh_dir("stale_temporaries");
  const std::string path = dir + "/model.safetensors";
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // reaped: no process has this id now
  const std::string dead = path + ".tmp." + std::to_string(child);
  const std::string running = path + ".tmp." + std::to_string(::getppid());
  const std::string other_file = dir + "/other.safetensors.tmp." + std::to_string(child);
  const std::string not_a_pid = path + ".tmp.x" + std::to_string(child);
  for (const std::string& p : {dead, running, other_file, not_a_pid}) write_bytes(p, "partial");
  const std::vector<float> w = {1, 2};
  write_safetensors(path, {{"w", DType::F32, {2}, w.data(), 8}});
  EXPECT_FALSE(testing::exists(dead));
  EXPECT_TRUE(testing::exists(running));
  EXPECT_TRUE(testing::exists(other_file));
  EXPECT_TRUE(testing::exists(not_a_pid));
  EXPECT_EQ(SafetensorsFile(path).tensors().size(), 1u);
}

}  // namespace
}  // namespace draftlab
