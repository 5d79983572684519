// GGUF reader: the two peer vocabulary files parse, every value type round-trips through a hand-built file,
// and truncated or lying files throw draftlab::Error (this file also runs under AddressSanitizer).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>

#include "core/base/error.h"
#include "core/io/gguf.h"
#include "gguf_every_type.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using testing::shared_path;

// ---- a tiny GGUF writer for hand-made files --------------------------------------------------------------------

class GgufBuilder {
 public:
  GgufBuilder& raw_u32(uint32_t v) { return put(v); }
  GgufBuilder& raw_u64(uint64_t v) { return put(v); }
  GgufBuilder& raw_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes_ += s;
    return *this;
  }
  GgufBuilder& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    bytes_ += "GGUF";
    put(version);
    put(tensors);
    return put(kvs);
  }
  template <typename T>
  GgufBuilder& kv(const std::string& key, uint32_t type, T value) {
    raw_string(key);
    put(type);
    return put(value);
  }
  GgufBuilder& kv_string(const std::string& key, const std::string& value) {
    raw_string(key);
    put<uint32_t>(8);
    return raw_string(value);
  }
  template <typename T>
  GgufBuilder& put(T v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = testing::temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// A file holding one key of every GGUF value type plus two tensor infos.
std::string every_type_file() {
  GgufBuilder b;
  b.header(/*tensors=*/2, /*kvs=*/14);
  b.kv<uint8_t>("u8", 0, 200).kv<int8_t>("i8", 1, -100).kv<uint16_t>("u16", 2, 60000).kv<int16_t>("i16", 3, -30000);
  b.kv<uint32_t>("u32", 4, 4000000000u).kv<int32_t>("i32", 5, -2000000000).kv<float>("f32", 6, 1.5f);
  b.kv<uint8_t>("bool", 7, 1).kv_string("str", "h\xC3\xA9llo");
  b.kv<uint64_t>("u64", 10, 1ull << 40).kv<int64_t>("i64", 11, -(1ll << 40)).kv<double>("f64", 12, 0.25);
  // array of 3 int32
  b.raw_string("ints").put<uint32_t>(9).put<uint32_t>(5).put<uint64_t>(3).put<int32_t>(7).put<int32_t>(-8).put<int32_t>(9);
  // array of 2 strings
  b.raw_string("strs").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2).raw_string("a").raw_string("");
  // tensor infos: name, n_dims, dims, type, offset
  b.raw_string("tok_embd.weight").put<uint32_t>(2).put<uint64_t>(64).put<uint64_t>(512).put<uint32_t>(0).put<uint64_t>(0);
  b.raw_string("norm").put<uint32_t>(1).put<uint64_t>(64).put<uint32_t>(1).put<uint64_t>(131072);
  return b.bytes();
}

// Runs read_gguf and returns the Error message ("" if it parsed).
std::string parse_error(const std::string& path) {
  try {
    read_gguf(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---- the peer files ---------------------------------------------------------------------------------------------

TEST(Gguf, ParsesLlamaSpmVocabulary) {
  DRAFTLAB_REQUIRE_SHARED("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  const GgufFile f = read_gguf(shared_path("tokenizer-tests/ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  // Cross-checks within the file: the declared vocabulary size, one score and one type per token.
  EXPECT_EQ(static_cast<int64_t>(tokens.size()), f.get_int("llama.vocab_size"));
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores").size(), tokens.size());
  EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type").size(), tokens.size());
  EXPECT_EQ(tokens.at(f.get_int("tokenizer.ggml.bos_token_id")), "<s>");
  EXPECT_EQ(tokens.at(f.get_int("tokenizer.ggml.eos_token_id")), "</s>");
  EXPECT_EQ(tokens.at(f.get_int("tokenizer.ggml.unknown_token_id")), "<unk>");
  EXPECT_TRUE(std::get<bool>(f.metadata.at("tokenizer.ggml.add_bos_token").v));
}

TEST(Gguf, ParsesGpt2Vocabulary) {
  DRAFTLAB_REQUIRE_SHARED("tokenizer-tests/ggml-vocab-gpt-2.gguf");
  const GgufFile f = read_gguf(shared_path("tokenizer-tests/ggml-vocab-gpt-2.gguf"));
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  const auto merges = f.get_string_array("tokenizer.ggml.merges");
  EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type").size(), tokens.size());
  EXPECT_EQ(tokens.at(f.get_int("tokenizer.ggml.eos_token_id")), "<|endoftext|>");
  // Byte-level BPE: 256 byte symbols plus one token per merge plus <|endoftext|>.
  EXPECT_EQ(tokens.size(), merges.size() + 256 + 1);
  EXPECT_NE(merges.front().find(' '), std::string::npos);  // each merge is "left right"
}

// ---- hand-made files --------------------------------------------------------------------------------------------

TEST(Gguf, EveryValueTypeRoundTrips) {
  const GgufFile f = read_gguf(write_temp("every_type.gguf", every_type_file()));
  testing::expect_every_scalar_type(f);
  EXPECT_EQ(f.get_string_array("strs"), (std::vector<std::string>{"a", ""}));
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].name, "tok_embd.weight");
  EXPECT_EQ(f.tensors[0].dims, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(f.tensors[1].name, "norm");
  EXPECT_EQ(f.tensors[1].type, 1u);
  EXPECT_EQ(f.tensors[1].offset, 131072u);
}

TEST(Gguf, TypedAccessorsRejectMissingAndMistypedKeys) {
  const std::string path = write_temp("accessors.gguf", every_type_file());
  const GgufFile f = read_gguf(path);
  EXPECT_THROW(f.get_string("u8"), Error);
  EXPECT_THROW(f.get_int("str"), Error);
  EXPECT_THROW(f.get_int("f32"), Error);
  EXPECT_THROW(f.get_string_array("ints"), Error);
  EXPECT_THROW(f.get_float_array("ints"), Error);
  EXPECT_THROW(f.get_int_array("str"), Error);
  try {
    f.get_int("no.such.key");
    FAIL() << "missing key accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no.such.key"), std::string::npos) << e.what();
  }
}

TEST(Gguf, EveryTruncationThrowsError) {
  const std::string full = every_type_file();
  for (size_t n = 0; n < full.size(); ++n) {
    const std::string path = write_temp("truncated.gguf", full.substr(0, n));
    const std::string message = parse_error(path);
    EXPECT_NE(message, "") << "a " << n << "-byte prefix parsed";
    EXPECT_NE(message.find(path), std::string::npos) << message;
  }
}

TEST(Gguf, TruncatedPeerFileThrowsError) {
  DRAFTLAB_REQUIRE_SHARED("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  std::ifstream in(shared_path("tokenizer-tests/ggml-vocab-llama-spm.gguf"), std::ios::binary);
  const std::string full((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t n : {size_t{10}, size_t{100}, full.size() / 3, full.size() / 2, full.size() - 1}) {
    const std::string message = parse_error(write_temp("peer_truncated.gguf", full.substr(0, n)));
    EXPECT_NE(message, "") << n;
  }
}

TEST(Gguf, LyingCountsAndTypesThrowError) {
  struct Case {
    const char* name;
    std::string bytes;
    const char* message_part;  // what the error must mention
  };
  std::vector<Case> cases;
  cases.push_back({"bad magic", GgufBuilder().raw_u32(0x46554747 + 1).raw_u32(3).raw_u64(0).raw_u64(0).bytes(), "magic"});
  cases.push_back({"version 1", GgufBuilder().header(0, 0, 1).bytes(), "version"});
  cases.push_back({"absurd kv count", GgufBuilder().header(0, 1ull << 60).bytes(), "metadata_kv_count"});
  cases.push_back({"absurd tensor count", GgufBuilder().header(1ull << 62, 0).bytes(), "tensor_count"});
  cases.push_back({"absurd string length",
                   GgufBuilder().header(0, 1).raw_u64(1ull << 63).raw_u32(0).raw_u64(0).bytes(), "metadata key 0"});
  cases.push_back({"unknown value type", GgufBuilder().header(0, 1).raw_string("k").raw_u32(13).raw_u64(0).bytes(), "k"});
  cases.push_back({"bool not 0/1", GgufBuilder().header(0, 1).kv<uint8_t>("flag", 7, 2).bytes(), "flag"});
  cases.push_back({"absurd array length",
                   GgufBuilder().header(0, 1).raw_string("arr").raw_u32(9).raw_u32(6).raw_u64(1ull << 61).bytes(), "arr"});
  cases.push_back({"unknown array element type",
                   GgufBuilder().header(0, 1).raw_string("arr").raw_u32(9).raw_u32(99).raw_u64(0).bytes(), "arr"});
  cases.push_back({"duplicate key", GgufBuilder().header(0, 2).kv<uint8_t>("k", 0, 1).kv<uint8_t>("k", 0, 2).bytes(), "k"});
  cases.push_back({"too many dims",
                   GgufBuilder().header(1, 0).raw_string("t").raw_u32(1000).raw_u64(0).raw_u64(0).raw_u64(0).bytes(),
                   "n_dims"});
  {
    // Arrays of arrays nested 100 deep: must stop at a depth limit, not recurse without bound.
    GgufBuilder deep;
    deep.header(0, 1).raw_string("deep").raw_u32(9);
    for (int i = 0; i < 100; ++i) deep.raw_u32(9).raw_u64(1);
    deep.raw_u32(0).raw_u64(0);
    cases.push_back({"deep nesting", deep.bytes(), "deep"});
  }
  for (const Case& c : cases) {
    const std::string message = parse_error(write_temp("lying.gguf", c.bytes));
    EXPECT_NE(message.find(c.message_part), std::string::npos) << c.name << ": \"" << message << "\"";
  }
}

TEST(Gguf, MissingFileThrowsError) {
  EXPECT_THROW(read_gguf(testing::temp_dir() + "/does-not-exist.gguf"), Error);
}

}  // namespace
}  // namespace draftlab
