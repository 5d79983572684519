// llama2.c legacy checkpoints: the two real tiny models in ../shared, spot-checked against raw file offsets
// computed here independently, plus truncated / corrupted copies.
#include "test_errors.h"
#include "core/io/llama2c_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>

#include "core/base/error.h"
#include "test_paths.h"

namespace draftlab {
namespace {

const char* kAidreams = "models/aidreams260K/aidreams260K.bin";
const char* kStories = "models/stories260K/stories260K.bin";

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The float at byte offset 28 + 4 * index of the raw file.
float raw_float(const std::string& bytes, size_t index) {
  float v = 0;
  std::memcpy(&v, bytes.data() + 28 + 4 * index, 4);
  return v;
}

// Element [row][col] of a 2-D F32 entry (or [col] of a 1-D one with row 0).
float entry_float(const TensorEntry& e, int64_t row, int64_t col) {
  const int64_t cols = e.shape.back();
  float v = 0;
  std::memcpy(&v, e.data + 4 * (row * cols + col), 4);
  return v;
}

void set_int32(std::string* bytes, size_t index, int32_t value) { std::memcpy(&(*bytes)[4 * index], &value, 4); }

TEST(Llama2cCheckpoint, Aidreams260KHeaderAndWeights) {
  DRAFTLAB_REQUIRE_SHARED(kAidreams);
  const std::string path = testing::shared_path(kAidreams);
  const Llama2cCheckpoint ckpt(path);
  const ModelConfig& c = ckpt.config();
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_position_embeddings, 128);
  EXPECT_TRUE(ckpt.shared_classifier());
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{1});
  EXPECT_EQ(ckpt.tensors().size(), 1u + 9u * 4u + 1u);
  EXPECT_EQ(ckpt.find("lm_head.weight"), nullptr);

  // Offsets (in floats after the 28-byte header) from run.c's layout, with L=4, dim=64, kv_dim=64, hidden=172.
  const std::string raw = read_bytes(path);
  const size_t emb = 512 * 64, rms_att = 4 * 64, wq = 4 * 64 * 64, wk = 4 * 64 * 64, wv = 4 * 64 * 64,
               wo = 4 * 64 * 64, rms_ffn = 4 * 64, w1 = 4 * 172 * 64, w2 = 4 * 64 * 172, w3 = 4 * 172 * 64;

  const TensorEntry* embed = ckpt.find("model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(embed->dtype, DType::F32);
  EXPECT_EQ(embed->nbytes, 512u * 64u * 4u);
  EXPECT_EQ(embed->file, path);
  EXPECT_EQ(entry_float(*embed, 3, 5), raw_float(raw, 3 * 64 + 5));
  EXPECT_EQ(entry_float(*embed, 511, 63), raw_float(raw, 511 * 64 + 63));

  const TensorEntry* norm1 = ckpt.find("model.layers.1.input_layernorm.weight");
  ASSERT_NE(norm1, nullptr);
  EXPECT_EQ(entry_float(*norm1, 0, 7), raw_float(raw, emb + 1 * 64 + 7));

  const TensorEntry* k2 = ckpt.find("model.layers.2.self_attn.k_proj.weight");
  ASSERT_NE(k2, nullptr);
  EXPECT_EQ(k2->shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(entry_float(*k2, 7, 9), raw_float(raw, emb + rms_att + wq + 2 * 64 * 64 + 7 * 64 + 9));

  const TensorEntry* down3 = ckpt.find("model.layers.3.mlp.down_proj.weight");
  ASSERT_NE(down3, nullptr);
  EXPECT_EQ(down3->shape, (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(entry_float(*down3, 10, 100),
            raw_float(raw, emb + rms_att + wq + wk + wv + wo + rms_ffn + w1 + 3 * 64 * 172 + 10 * 172 + 100));

  const TensorEntry* up0 = ckpt.find("model.layers.0.mlp.up_proj.weight");
  ASSERT_NE(up0, nullptr);
  EXPECT_EQ(up0->shape, (std::vector<int64_t>{172, 64}));
  EXPECT_EQ(entry_float(*up0, 171, 1), raw_float(raw, emb + rms_att + wq + wk + wv + wo + rms_ffn + w1 + w2 + 171 * 64 + 1));

  const TensorEntry* final_norm = ckpt.find("model.norm.weight");
  ASSERT_NE(final_norm, nullptr);
  EXPECT_EQ(entry_float(*final_norm, 0, 63),
            raw_float(raw, emb + rms_att + wq + wk + wv + wo + rms_ffn + w1 + w2 + w3 + 63));
  // RMSNorm gains of a trained model are not all zero (guards against pointing into the skipped tables).
  EXPECT_NE(entry_float(*final_norm, 0, 0), 0.0f);
}

TEST(Llama2cCheckpoint, Stories260KHeaderAndGqaShapes) {
  DRAFTLAB_REQUIRE_SHARED(kStories);
  const std::string path = testing::shared_path(kStories);
  const Llama2cCheckpoint ckpt(path);
  const ModelConfig& c = ckpt.config();
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_hidden_layers, 5);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_position_embeddings, 512);
  // The shipped file's header has vocab_size +512 and its size (1056540 bytes) has no room for a classifier:
  // the classifier is shared with the embedding.
  EXPECT_TRUE(ckpt.shared_classifier());
  EXPECT_EQ(ckpt.tensors().size(), 1u + 9u * 5u + 1u);

  const std::string raw = read_bytes(path);
  const size_t emb = 512 * 64, rms_att = 5 * 64, wq = 5 * 64 * 64, wk = 5 * 32 * 64, wv = 5 * 32 * 64;
  const TensorEntry* v4 = ckpt.find("model.layers.4.self_attn.v_proj.weight");
  ASSERT_NE(v4, nullptr);
  EXPECT_EQ(v4->shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(entry_float(*v4, 31, 63), raw_float(raw, emb + rms_att + wq + wk + 4 * 32 * 64 + 31 * 64 + 63));
  const TensorEntry* o0 = ckpt.find("model.layers.0.self_attn.o_proj.weight");
  ASSERT_NE(o0, nullptr);
  EXPECT_EQ(o0->shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(entry_float(*o0, 0, 0), raw_float(raw, emb + rms_att + wq + wk + wv));
}

TEST(Llama2cCheckpoint, UntiedClassifierFollowsTheFreqTables) {
  DRAFTLAB_REQUIRE_SHARED(kStories);
  // stories260K with a negative vocab_size and a classifier appended: wcls[i] = i * 0.5.
  std::string bytes = read_bytes(testing::shared_path(kStories));
  set_int32(&bytes, 5, -512);
  std::vector<float> wcls(512 * 64);
  for (size_t i = 0; i < wcls.size(); ++i) wcls[i] = static_cast<float>(i) * 0.5f;
  bytes.append(reinterpret_cast<const char*>(wcls.data()), wcls.size() * 4);
  const std::string path = testing::temp_dir() + "/stories_untied.bin";
  write_bytes(path, bytes);

  const Llama2cCheckpoint ckpt(path);
  EXPECT_FALSE(ckpt.shared_classifier());
  EXPECT_FALSE(ckpt.config().tie_word_embeddings);
  EXPECT_EQ(ckpt.config().vocab_size, 512);
  EXPECT_EQ(ckpt.find("model.embed_tokens.weight")->shape, (std::vector<int64_t>{512, 64}));
  const TensorEntry* head = ckpt.find("lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(entry_float(*head, 0, 0), 0.0f);
  EXPECT_EQ(entry_float(*head, 2, 3), (2 * 64 + 3) * 0.5f);
  EXPECT_EQ(entry_float(*head, 511, 63), (511 * 64 + 63) * 0.5f);
}

TEST(Llama2cCheckpointErrors, TruncatedCopySaysExpectedAndActualSize) {
  DRAFTLAB_REQUIRE_SHARED(kAidreams);
  const std::string bytes = read_bytes(testing::shared_path(kAidreams));
  ASSERT_EQ(bytes.size(), 932124u);
  const std::string path = testing::temp_dir() + "/aidreams_truncated.bin";
  write_bytes(path, bytes.substr(0, bytes.size() - 4));
  draftlab::testing::expect_error([&] { Llama2cCheckpoint c(path); },
               {path, "expected 932124 bytes", "dim=64", "n_layers=4", "vocab_size=512", "seq_len=128", "file has 932120"});

  write_bytes(path, bytes.substr(0, 10));
  draftlab::testing::expect_error([&] { Llama2cCheckpoint c(path); }, {path, "header", "28 bytes", "10 bytes"});
}

TEST(Llama2cCheckpointErrors, CorruptedHeaderValues) {
  DRAFTLAB_REQUIRE_SHARED(kAidreams);
  const std::string original = read_bytes(testing::shared_path(kAidreams));
  const std::string path = testing::temp_dir() + "/aidreams_corrupt.bin";
  struct Case {
    size_t index;
    int32_t value;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {0, -64, {"header dim", "positive", "-64"}},
      {3, 5, {"header n_heads", "divisor of dim (64)", "5"}},
      {4, 3, {"header n_kv_heads", "divisor of n_heads (4)", "3"}},
      {5, 0, {"header vocab_size", "non-zero"}},
      {6, 0, {"header seq_len", "positive"}},
      {3, 64, {"header n_heads", "even"}},  // head size 1
      {2, 5, {"expected", "n_layers=5", "file has 932124"}},
      {2, 1 << 30, {"file size", "n_layers=1073741824"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.index);
    std::string bytes = original;
    set_int32(&bytes, c.index, c.value);
    write_bytes(path, bytes);
    std::vector<std::string> needles = c.needles;
    needles.push_back(path);
    draftlab::testing::expect_error([&] { Llama2cCheckpoint ckpt(path); }, needles);
  }
}

TEST(Llama2cCheckpointErrors, FlippedVocabSignIsPointedOut) {
  DRAFTLAB_REQUIRE_SHARED(kAidreams);
  std::string bytes = read_bytes(testing::shared_path(kAidreams));
  set_int32(&bytes, 5, -512);  // claims an untied classifier the file does not have
  const std::string path = testing::temp_dir() + "/aidreams_flipped.bin";
  write_bytes(path, bytes);
  draftlab::testing::expect_error([&] { Llama2cCheckpoint c(path); }, {path, "untied classifier", "file has 932124", "shared classifier"});
}

}  // namespace
}  // namespace draftlab
