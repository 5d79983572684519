// GGUF writer round trips through the reader: every metadata type, tensor shapes (ggml order), offsets, alignment
// and data bytes; truncated or lying files throw Error naming the file; the llama config comes back from the
// metadata it was written as. Torch-free (this file also runs under AddressSanitizer).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/gguf.h"
#include "gguf_every_type.h"
#include "core/io/gguf_checkpoint.h"
#include "core/io/gguf_writer.h"
#include "test_paths.h"

namespace draftlab {
namespace {

std::string temp_path(const std::string& name) { return testing::temp_dir() + "/" + name; }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string write_bytes(const std::string& name, const std::string& bytes) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// The message of the Error `f` throws ("" if none).
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Tensor payloads of sizes that are not multiples of the alignment, so padding matters.
struct Payloads {
  std::vector<float> matrix;      // [3, 5] F32
  std::vector<uint16_t> vector;   // [7] F16 (bit patterns)
  std::vector<uint16_t> cube;     // [2, 3, 4] BF16 (bit patterns)
  Payloads() {
    for (int i = 0; i < 15; ++i) matrix.push_back(0.5f * static_cast<float>(i) - 3.0f);
    for (int i = 0; i < 7; ++i) vector.push_back(static_cast<uint16_t>(0x3C00 + i));
    for (int i = 0; i < 24; ++i) cube.push_back(static_cast<uint16_t>(0x4000 + 3 * i));
  }
};

GgufWriter every_type_writer(const Payloads& p, uint32_t alignment = kGgufDefaultAlignment) {
  GgufWriter w(alignment);
  w.add("u8", uint8_t{200});
  w.add("i8", int8_t{-100});
  w.add("u16", uint16_t{60000});
  w.add("i16", int16_t{-30000});
  w.add("u32", uint32_t{4000000000u});
  w.add("i32", int32_t{-2000000000});
  w.add("f32", 1.5f);
  w.add("bool", true);
  w.add_string("str", "h\xC3\xA9llo");
  w.add("u64", uint64_t{1} << 40);
  w.add("i64", -(int64_t{1} << 40));
  w.add("f64", 0.25);
  w.add_array("ints", std::vector<int32_t>{7, -8, 9});
  w.add_array("floats", std::vector<float>{0.5f, -2.0f});
  w.add_array("flags", std::vector<bool>{true, false, true});
  w.add_array("bytes", std::vector<uint8_t>{});
  w.add_string_array("strs", {"a", "", "\xE2\x96\x81x"});
  w.add_tensor("matrix", kGgmlF32, {3, 5}, p.matrix.data(), p.matrix.size() * 4);
  w.add_tensor("vector", kGgmlF16, {7}, p.vector.data(), p.vector.size() * 2);
  w.add_tensor("cube", kGgmlBF16, {2, 3, 4}, p.cube.data(), p.cube.size() * 2);
  return w;
}

TEST(GgufWriter, EveryMetadataTypeRoundTrips) {
  const Payloads p;
  const std::string path = temp_path("every_type_written.gguf");
  every_type_writer(p).write(path);
  const GgufFile f = read_gguf(path);
  EXPECT_EQ(f.version, 3u);
  testing::expect_every_scalar_type(f);
  EXPECT_EQ(f.get_float_array("floats"), (std::vector<double>{0.5, -2.0}));
  const auto& flags = std::get<GgufArray>(f.metadata.at("flags").v);
  ASSERT_EQ(flags.size(), 3u);
  EXPECT_EQ(std::get<bool>(flags[0].v), true);
  EXPECT_EQ(std::get<bool>(flags[1].v), false);
  EXPECT_TRUE(f.get_int_array("bytes").empty());
  EXPECT_EQ(f.get_string_array("strs"), (std::vector<std::string>{"a", "", "\xE2\x96\x81x"}));
  EXPECT_EQ(f.metadata.size(), 17u);  // nothing else: no general.alignment at the default alignment
}

TEST(GgufWriter, TensorsRoundTripWithGgmlOrderAlignedOffsetsAndTheirBytes) {
  const Payloads p;
  for (uint32_t alignment : {32u, 64u, 8u}) {
    const std::string path = temp_path("tensors_" + std::to_string(alignment) + ".gguf");
    every_type_writer(p, alignment).write(path);
    const GgufTensorFile file(path);
    const GgufFile& g = file.gguf();
    EXPECT_EQ(g.alignment, alignment);
    if (alignment != kGgufDefaultAlignment) {
      EXPECT_EQ(g.get_int("general.alignment"), alignment);
    } else {
      EXPECT_FALSE(g.has("general.alignment"));
    }
    EXPECT_EQ(g.data_offset % alignment, 0u);
    ASSERT_EQ(g.tensors.size(), 3u);
    EXPECT_EQ(g.tensors[0].dims, (std::vector<uint64_t>{5, 3}));  // innermost first
    EXPECT_EQ(g.tensors[1].dims, (std::vector<uint64_t>{7}));
    EXPECT_EQ(g.tensors[2].dims, (std::vector<uint64_t>{4, 3, 2}));
    EXPECT_EQ(g.tensors[0].type, kGgmlF32);
    EXPECT_EQ(g.tensors[1].type, kGgmlF16);
    EXPECT_EQ(g.tensors[2].type, kGgmlBF16);
    // Offsets: back to back, each padded to the alignment.
    auto padded = [&](uint64_t n) { return (n + alignment - 1) / alignment * alignment; };
    EXPECT_EQ(g.tensors[0].offset, 0u);
    EXPECT_EQ(g.tensors[1].offset, padded(60));
    EXPECT_EQ(g.tensors[2].offset, padded(60) + padded(14));
    EXPECT_EQ(read_all(path).size(), g.data_offset + padded(60) + padded(14) + padded(48));

    const TensorEntry* m = file.find("matrix");
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->dtype, DType::F32);
    EXPECT_EQ(m->shape, (std::vector<int64_t>{3, 5}));
    ASSERT_EQ(m->nbytes, 60u);
    EXPECT_EQ(std::memcmp(m->data, p.matrix.data(), 60), 0);
    const TensorEntry* v = file.find("vector");
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->dtype, DType::F16);
    EXPECT_EQ(std::memcmp(v->data, p.vector.data(), 14), 0);
    const TensorEntry* c = file.find("cube");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->dtype, DType::BF16);
    EXPECT_EQ(c->shape, (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(std::memcmp(c->data, p.cube.data(), 48), 0);
    EXPECT_EQ(file.find("absent"), nullptr);
  }
}

TEST(GgufWriter, EveryTruncationOfTheDataThrowsErrorNamingTheFile) {
  const Payloads p;
  const std::string full_path = temp_path("to_truncate.gguf");
  every_type_writer(p).write(full_path);
  const std::string full = read_all(full_path);
  const GgufFile g = read_gguf(full_path);
  // The last byte any tensor needs; the padding after it may go.
  const size_t needed = g.data_offset + g.tensors[2].offset + 48;
  for (size_t n = 0; n < needed; ++n) {
    const std::string path = write_bytes("truncated_written.gguf", full.substr(0, n));
    const std::string message = error_of([&] { GgufTensorFile f(path); });
    EXPECT_NE(message.find(path), std::string::npos) << n << " bytes: \"" << message << "\"";
  }
  EXPECT_EQ(error_of([&] { GgufTensorFile f(write_bytes("just_enough.gguf", full.substr(0, needed))); }), "");
}

// The byte offset of tensor `name`'s ggml type field in the directory of `bytes` (found by its name).
size_t type_field(const std::string& bytes, const std::string& name, size_t n_dims) {
  const size_t at = bytes.find(name);
  EXPECT_NE(at, std::string::npos);
  return at + name.size() + 4 + 8 * n_dims;
}

TEST(GgufWriter, QuantizedTensorIsListedButReadingItNamesFileTensorAndType) {
  const Payloads p;
  const std::string written = temp_path("to_patch.gguf");
  every_type_writer(p).write(written);
  std::string bytes = read_all(written);
  const uint32_t q5_1 = 7;  // a block type draftlab does not read (Q8_0 and Q4_0 it does: test_ggml_quant)
  std::memcpy(&bytes[type_field(bytes, "vector", 1)], &q5_1, 4);
  const std::string path = write_bytes("quantized.gguf", bytes);
  const GgufTensorFile file(path);
  EXPECT_TRUE(file.has("vector"));
  EXPECT_NE(file.find("matrix"), nullptr);  // the others stay readable
  const std::string message = error_of([&] { file.find("vector"); });
  for (const char* part : {path.c_str(), "vector", "Q5_1"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " missing from \"" << message << "\"";
}

TEST(GgufWriter, LyingDirectoryThrowsError) {
  const Payloads p;
  const std::string written = temp_path("to_lie.gguf");
  every_type_writer(p).write(written);
  const std::string good = read_all(written);
  const size_t offset_field = type_field(good, "vector", 1) + 4;
  struct Case {
    const char* name;
    uint64_t offset;
    const char* message_part;
  };
  for (const Case& c : {Case{"misaligned offset", 4, "offset"}, Case{"offset past the end", 1ull << 40, "data"},
                        Case{"offset that wraps", ~uint64_t{0} - 31, "data"}}) {
    std::string bytes = good;
    std::memcpy(&bytes[offset_field], &c.offset, 8);
    const std::string path = write_bytes("lying_written.gguf", bytes);
    const std::string message = error_of([&] { GgufTensorFile f(path); });
    EXPECT_NE(message.find(path), std::string::npos) << c.name << ": " << message;
    EXPECT_NE(message.find(c.message_part), std::string::npos) << c.name << ": " << message;
  }
  {
    std::string bytes = good;
    const uint64_t huge = 1ull << 62;
    std::memcpy(&bytes[type_field(good, "matrix", 2) - 16], &huge, 8);  // dim 0 of matrix
    const std::string path = write_bytes("overflowing_written.gguf", bytes);
    EXPECT_NE(error_of([&] { GgufTensorFile f(path); }).find("matrix"), std::string::npos);
  }
}

TEST(GgufWriter, RejectsBadInputAndLeavesNoFileBehind) {
  const Payloads p;
  EXPECT_THROW(GgufWriter(48), Error);
  GgufWriter w;
  w.add("k", uint32_t{1});
  EXPECT_THROW(w.add("k", 2.0f), Error);
  w.add_tensor("t", kGgmlF32, {3, 5}, p.matrix.data(), 60);
  EXPECT_THROW(w.add_tensor("t", kGgmlF32, {3, 5}, p.matrix.data(), 60), Error);
  EXPECT_THROW(w.add_tensor("u", kGgmlF32, {3, 5}, p.matrix.data(), 56), Error);  // wrong byte count
  EXPECT_THROW(w.add_tensor("v", kGgmlF16, {1, 1, 1, 1, 1}, p.vector.data(), 2), Error);  // 5 dims
  const std::string dir = temp_path("no/such/dir");
  const std::string message = error_of([&] { w.write(dir + "/out.gguf"); });
  EXPECT_NE(message.find(dir + "/out.gguf"), std::string::npos) << message;
  EXPECT_FALSE(is_file(dir + "/out.gguf"));
}

// ---- llama metadata -> ModelConfig ----------------------------------------------------------------------------

GgufWriter llama_metadata() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add("llama.context_length", uint32_t{512});
  w.add("llama.embedding_length", uint32_t{256});
  w.add("llama.block_count", uint32_t{16});
  w.add("llama.feed_forward_length", uint32_t{1024});
  w.add("llama.attention.head_count", uint32_t{4});
  w.add("llama.attention.head_count_kv", uint32_t{2});
  w.add("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.add("llama.rope.freq_base", 500000.0f);
  w.add("llama.rope.dimension_count", uint32_t{64});
  w.add("llama.vocab_size", uint32_t{4096});
  w.add("tokenizer.ggml.bos_token_id", uint32_t{0});
  w.add("tokenizer.ggml.eos_token_id", uint32_t{1});
  w.add("tokenizer.ggml.eot_token_id", uint32_t{0});
  return w;
}

TEST(GgufCheckpoint, ConfigComesFromTheLlamaMetadata) {
  const std::string path = temp_path("llama_meta.gguf");
  llama_metadata().write(path);
  const ModelConfig c = gguf_model_config(read_gguf(path), /*has_output_tensor=*/false);
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.intermediate_size, 1024);
  EXPECT_EQ(c.num_hidden_layers, 16);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);  // the float32 nearest 1e-5 comes back as the decimal it was written from
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(c.vocab_size, 4096);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{1, 0}));  // eos, then eot
  EXPECT_FALSE(gguf_model_config(read_gguf(path), true).tie_word_embeddings);
}

TEST(GgufCheckpoint, MissingOrWrongMetadataNamesTheKey) {
  {
    GgufWriter w;
    w.add_string("general.architecture", "gpt2");
    const std::string path = temp_path("gpt2_arch.gguf");
    w.write(path);
    EXPECT_NE(error_of([&] { gguf_model_config(read_gguf(path), false); }).find("general.architecture"),
              std::string::npos);
  }
  {
    GgufWriter w = llama_metadata();
    w.add("llama.attention.key_length", uint32_t{32});  // rope.dimension_count says 64
    const std::string path = temp_path("partial_rope.gguf");
    w.write(path);
    EXPECT_NE(error_of([&] { gguf_model_config(read_gguf(path), false); }).find("rope.dimension_count"),
              std::string::npos);
  }
  {
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add("llama.embedding_length", uint32_t{256});
    const std::string path = temp_path("incomplete_llama.gguf");
    w.write(path);
    const std::string message = error_of([&] { gguf_model_config(read_gguf(path), false); });
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("llama.feed_forward_length"), std::string::npos) << message;
  }
}

TEST(GgufCheckpoint, TensorNamesMapBothWays) {
  EXPECT_EQ(gguf_tensor_name("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.input_layernorm.weight"), "blk.0.attn_norm.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.12.self_attn.q_proj.weight"), "blk.12.attn_q.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.self_attn.k_proj.weight"), "blk.3.attn_k.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.self_attn.v_proj.weight"), "blk.3.attn_v.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.self_attn.o_proj.weight"), "blk.3.attn_output.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.post_attention_layernorm.weight"), "blk.3.ffn_norm.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.mlp.gate_proj.weight"), "blk.3.ffn_gate.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.mlp.up_proj.weight"), "blk.3.ffn_up.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.mlp.down_proj.weight"), "blk.3.ffn_down.weight");
  EXPECT_EQ(gguf_tensor_name("model.norm.weight"), "output_norm.weight");
  EXPECT_EQ(gguf_tensor_name("lm_head.weight"), "output.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.self_attn.rotary_emb.inv_freq"), "");
}

}  // namespace
}  // namespace draftlab
