// export_gguf and LlamaModel::load(.gguf): draftlab reads back its own GGUF of ts-tiny (Hugging Face, fp16) and of
// aidreams260K (llama2.c, fp32) and decodes greedily to the very same tokens; the config and the vocabulary come
// back from the file; q/k rows are stored in llama.cpp's consecutive-pairs RoPE layout; damaged files are an Error.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/decoding/vanilla_decoder.h"
#include "core/io/ggml_quant.h"
#include "core/io/gguf.h"
#include "core/io/gguf_checkpoint.h"
#include "core/model/native_decoder.h"
#include "core/io/safetensors.h"
#include "core/text/tokenizer.h"
#include "core/training/gguf_export.h"
#include "io/model_config_checks.h"
#include "test_paths.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

const std::string kTsTiny = "data/models/ts-tiny";
const char kAidreams[] = "models/aidreams260K/aidreams260K.bin";
const char kTok512[] = "models/aidreams260K/tok512.bin";

std::vector<int64_t> greedy(const LlamaModel& model, const Tokenizer& tok, const std::string& prompt, int64_t n = 40) {
  std::vector<int64_t> ids;
  for (int32_t id : tok.encode(prompt, true)) ids.push_back(id);
  GenerationConfig gen;
  gen.max_new_tokens = n;
  return generate_vanilla(model, ids, gen).tokens;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(GgufModel, TsTinyF32ExportDecodesIdentically) {
  const auto original = LlamaModel::load(source_path(kTsTiny), ComputeOptions{});
  const auto tok = load_tokenizer(source_path(kTsTiny));
  const std::string path = temp_dir() + "/ts-tiny-f32.gguf";
  export_gguf(*original, *tok, path, kGgmlF32, "ts-tiny");

  const auto loaded = LlamaModel::load(path, ComputeOptions{});
  expect_same_config(loaded->config(), original->config());
  EXPECT_EQ(loaded->config().eos_token_ids, original->config().eos_token_ids);  // [1, 0]: eos, then eot
  const auto gguf_tok = load_tokenizer(path);
  for (const char* prompt : {"once upon a time", "lily and her mom went to the park. lily saw a big tree",
                             "tom had a red ball."}) {
    const auto want = greedy(*original, *tok, prompt);
    ASSERT_EQ(want.size(), 40u);
    EXPECT_EQ(greedy(*loaded, *gguf_tok, prompt), want) << prompt;
  }
  // Same weights, so the same logits, not merely the same argmax (up to the kernels' summation order).
  const std::vector<int64_t> seq{0, 57, 300, 12, 999, 4, 77, 512};
  KvCache a = original->make_cache(8), b = loaded->make_cache(8);
  EXPECT_LT((original->forward_chain(a, seq).logits - loaded->forward_chain(b, seq).logits).abs().max().item<double>(),
            1e-4);
}

TEST(GgufModel, TsTinyF16ExportMatchesTheFp16CheckpointInFloat32) {
  // ts-tiny is stored in fp16, so f16 GGUF tensors hold exactly the checkpoint's values.
  const auto original = LlamaModel::load(source_path(kTsTiny), ComputeOptions{});
  const auto tok = load_tokenizer(source_path(kTsTiny));
  const std::string path = temp_dir() + "/ts-tiny-f16.gguf";
  export_gguf(*original, *tok, path, kGgmlF16, "ts-tiny");

  const GgufTensorFile file(path);
  EXPECT_EQ(file.gguf().get_int("general.file_type"), 1);
  EXPECT_EQ(file.find("token_embd.weight")->dtype, DType::F16);
  EXPECT_EQ(file.find("blk.0.attn_q.weight")->dtype, DType::F16);
  EXPECT_EQ(file.find("blk.0.attn_norm.weight")->dtype, DType::F32);  // norms stay F32, as llama.cpp expects
  EXPECT_EQ(file.find("output_norm.weight")->dtype, DType::F32);
  EXPECT_FALSE(file.has("output.weight"));  // tied embeddings
  // Byte for byte the checkpoint's fp16 embedding and v projection (no RoPE permutation on v).
  const SafetensorsCollection st(source_path(kTsTiny));
  for (const auto& [hf, gg] : {std::pair<std::string, std::string>{"model.embed_tokens.weight", "token_embd.weight"},
                              {"model.layers.2.self_attn.v_proj.weight", "blk.2.attn_v.weight"}}) {
    const TensorEntry* want = st.find(hf);
    const TensorEntry* got = file.find(gg);
    ASSERT_TRUE(want && got);
    ASSERT_EQ(want->dtype, DType::F16);
    ASSERT_EQ(got->nbytes, want->nbytes);
    EXPECT_EQ(std::memcmp(got->data, want->data, want->nbytes), 0) << gg;
  }

  const auto loaded = LlamaModel::load(path, ComputeOptions{});
  const auto gguf_tok = load_tokenizer(path);
  for (const char* prompt : {"once upon a time", "the little cat"})
    EXPECT_EQ(greedy(*loaded, *gguf_tok, prompt), greedy(*original, *tok, prompt)) << prompt;
}

TEST(GgufModel, TsTinyQ8_0AndQ4_0ExportsLoadAsTheQuantizedValuesOfTheCheckpoint) {
  // Every matrix in 32-value blocks along its rows (llama-quantize --pure); the loader dequantizes them, so the
  // model's weights are exactly dequantize(quantize(checkpoint)): RoPE's row permutation moves whole rows, which
  // commutes with quantizing each row's blocks.
  const auto original = LlamaModel::load(source_path(kTsTiny), ComputeOptions{});
  const auto tok = load_tokenizer(source_path(kTsTiny));
  const ModelConfig& c = original->config();
  const auto want_tensors = hf_named_tensors(c, original->weights(), at::kFloat);
  for (const auto& [type, file_type] : {std::pair<GgmlType, int>{kGgmlQ8_0, 7}, {kGgmlQ4_0, 2}}) {
    const std::string path = temp_dir() + "/ts-tiny-" + ggml_type_name(type).substr(0, 4) + ".gguf";
    export_gguf(*original, *tok, path, type, "ts-tiny");
    {
      const GgufTensorFile file(path);
      EXPECT_EQ(file.gguf().get_int("general.file_type"), file_type);
      EXPECT_EQ(file.stored_type("token_embd.weight"), static_cast<uint32_t>(type));
      EXPECT_EQ(file.stored_type("blk.3.ffn_down.weight"), static_cast<uint32_t>(type));
      EXPECT_EQ(file.stored_type("blk.3.ffn_norm.weight"), static_cast<uint32_t>(kGgmlF32));
    }
    const auto loaded = LlamaModel::load(path, ComputeOptions{});
    const auto got_tensors = hf_named_tensors(loaded->config(), loaded->weights(), at::kFloat);
    ASSERT_EQ(got_tensors.size(), want_tensors.size());
    for (size_t i = 0; i < want_tensors.size(); ++i) {
      const auto& [name, want] = want_tensors[i];
      ASSERT_EQ(got_tensors[i].first, name);
      at::Tensor expected = want.contiguous().clone();
      if (want.dim() == 2) {
        std::vector<uint8_t> blocks(static_cast<size_t>(want.numel() / 32) * ggml_quant_block_bytes(type));
        quantize_blocks(type, want.contiguous().data_ptr<float>(), want.numel(), blocks.data());
        dequantize_blocks(type, blocks.data(), want.numel(), expected.data_ptr<float>());
        // And the quantization is coarse as expected: within a step of the block's largest value.
        const double tolerance = want.abs().max().item<double>() / (type == kGgmlQ8_0 ? 127.0 : 8.0);
        EXPECT_LE((expected - want).abs().max().item<double>(), tolerance) << name;
      }
      EXPECT_TRUE(at::equal(got_tensors[i].second.contiguous(), expected)) << ggml_type_name(type) << " " << name;
    }
    // It decodes: 40 tokens in the vocabulary.
    const auto tokens = greedy(*loaded, *load_tokenizer(path), "once upon a time");
    ASSERT_EQ(tokens.size(), 40u);
    for (int64_t t : tokens) EXPECT_TRUE(t >= 0 && t < c.vocab_size);
    if (loaded->native() != nullptr) {
      // A Q8_0 / Q4_0 file stays in its blocks on the native path (not float32 copies), and computes the very bits
      // the float32 packing of the same values computes: d * q is exact, the FMA chains are the same.
      EXPECT_EQ(loaded->native()->storage(), type == kGgmlQ8_0 ? WeightStorage::Q8_0 : WeightStorage::Q4_0);
      ComputeOptions f32;
      f32.weights = WeightStorage::Float32;
      const auto wide = LlamaModel::load(path, f32);
      const std::vector<int64_t> seq{0, 57, 300, 12, 999, 4, 77, 512};
      KvCache a = loaded->make_cache(8), b = wide->make_cache(8);
      EXPECT_TRUE(at::equal(loaded->forward_chain(a, seq).logits, wide->forward_chain(b, seq).logits));
    }
  }
}

TEST(GgufModel, AQ8_0FileWhoseBlocksDoNotRequantizeToThemselvesIsRefusedNamingFileAndLayer) {
  // Halving the integers of one block (scale kept) gives values whose largest is no longer 127 steps: quantizing
  // them again picks another scale, so the Q8_0 packing would not hold the file's values. Loading must refuse
  // rather than drop the float32 values, and say how to load the file; --weights float32 keeps them.
  const auto original = LlamaModel::load(source_path(kTsTiny), ComputeOptions{});
  const std::string good = temp_dir() + "/ts-tiny-canonical-q8_0.gguf";
  export_gguf(*original, *load_tokenizer(source_path(kTsTiny)), good, kGgmlQ8_0, "ts-tiny");
  std::string bytes = read_all(good);
  uint64_t at = 0;
  {
    const GgufTensorFile file(good);
    for (const GgufTensorInfo& t : file.gguf().tensors)
      if (t.name == "blk.0.attn_q.weight") at = file.gguf().data_offset + t.offset;
  }
  ASSERT_GT(at, 0u);
  for (size_t j = 0; j < 32; ++j) bytes[at + 2 + j] = static_cast<char>(static_cast<int8_t>(bytes[at + 2 + j]) / 2);
  const std::string path = temp_dir() + "/ts-tiny-odd-q8_0.gguf";
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  try {
    LlamaModel::load(path, ComputeOptions{});
    ADD_FAILURE() << "loaded a Q8_0 file whose packing changes its values";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const char* part : {path.c_str(), "layer 0", "--weights float32"})
      EXPECT_NE(message.find(part), std::string::npos) << part << " missing from \"" << message << "\"";
  }
  ComputeOptions f32;
  f32.weights = WeightStorage::Float32;
  EXPECT_NO_THROW(LlamaModel::load(path, f32));
}

TEST(GgufModel, QueryAndKeyRowsAreInTheConsecutivePairsLayout) {
  // llama.cpp's converter: w.reshape(heads, 2, hd / 2, in).swapaxes(1, 2). Row 2i of a head is HF row i, row
  // 2i + 1 is HF row i + hd/2.
  const auto original = LlamaModel::load(source_path(kTsTiny), ComputeOptions{});
  const auto tok = load_tokenizer(source_path(kTsTiny));
  const std::string path = temp_dir() + "/ts-tiny-pairs.gguf";
  export_gguf(*original, *tok, path, kGgmlF16, "ts-tiny");
  const SafetensorsCollection st(source_path(kTsTiny));
  const GgufTensorFile file(path);
  const ModelConfig& c = original->config();
  const int64_t hd = c.head_dim, in = c.hidden_size;
  const TensorEntry* hf = st.find("model.layers.1.self_attn.k_proj.weight");
  const TensorEntry* gg = file.find("blk.1.attn_k.weight");
  ASSERT_TRUE(hf && gg);
  EXPECT_EQ(gg->shape, hf->shape);
  const size_t row_bytes = static_cast<size_t>(in) * 2;
  for (int64_t head = 0; head < c.num_key_value_heads; ++head) {
    for (int64_t i = 0; i < hd / 2; ++i) {
      const uint8_t* pair0 = gg->data + (head * hd + 2 * i) * row_bytes;
      const uint8_t* pair1 = gg->data + (head * hd + 2 * i + 1) * row_bytes;
      ASSERT_EQ(std::memcmp(pair0, hf->data + (head * hd + i) * row_bytes, row_bytes), 0) << head << " " << i;
      ASSERT_EQ(std::memcmp(pair1, hf->data + (head * hd + i + hd / 2) * row_bytes, row_bytes), 0) << head << " " << i;
    }
  }
}

TEST(GgufModel, Llama2cAidreamsExportDecodesIdentically) {
  DRAFTLAB_REQUIRE_SHARED(kAidreams);
  const auto original = LlamaModel::load(shared_path(kAidreams), ComputeOptions{});
  const auto tok = load_tokenizer(shared_path(kTok512));
  const std::string path = temp_dir() + "/aidreams260K.gguf";
  export_gguf(*original, *tok, path, kGgmlF32, "aidreams260K");

  const auto loaded = LlamaModel::load(path, ComputeOptions{});
  expect_same_config(loaded->config(), original->config());
  const GgufFile g = read_gguf(path);
  EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(g.get_int("tokenizer.ggml.eos_token_id"), 2);  // the vocabulary's </s> ...
  EXPECT_EQ(g.get_int("tokenizer.ggml.eot_token_id"), 1);  // ... and run.c's stop token, BOS
  const auto gguf_tok = load_tokenizer(path);
  for (const char* prompt : {"once upon a time", "the neural network dreams of", "a cat"}) {
    const auto want = greedy(*original, *tok, prompt);
    ASSERT_EQ(want.size(), 40u);
    EXPECT_EQ(greedy(*loaded, *gguf_tok, prompt), want) << prompt;
  }
}

TEST(GgufModel, DamagedFilesThrowErrorNamingTheFile) {
  const auto original = LlamaModel::load(source_path(kTsTiny), ComputeOptions{});
  const auto tok = load_tokenizer(source_path(kTsTiny));
  const std::string good = temp_dir() + "/ts-tiny-good.gguf";
  export_gguf(*original, *tok, good, kGgmlF16, "ts-tiny");
  const std::string bytes = read_all(good);
  auto error_of = [](const std::string& path) -> std::string {
    try {
      LlamaModel::load(path, ComputeOptions{});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  for (size_t n : {size_t{100}, bytes.size() / 2, bytes.size() - 4096}) {
    const std::string path = temp_dir() + "/ts-tiny-cut.gguf";
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(n));
    EXPECT_NE(error_of(path).find(path), std::string::npos) << n << ": " << error_of(path);
  }
  // A tensor of a quantized type draftlab does not read: the message names file, tensor and type.
  std::string quantized = bytes;
  const std::string name = "blk.0.attn_q.weight";
  const size_t type_at = quantized.find(name) + name.size() + 4 + 2 * 8;
  const uint32_t q5_1 = 7;
  std::memcpy(&quantized[type_at], &q5_1, 4);
  const std::string path = temp_dir() + "/ts-tiny-q5_1.gguf";
  std::ofstream(path, std::ios::binary).write(quantized.data(), static_cast<std::streamsize>(quantized.size()));
  const std::string message = error_of(path);
  for (const std::string& part : {path, name, std::string("Q5_1")})
    EXPECT_NE(message.find(part), std::string::npos) << part << " missing from \"" << message << "\"";
}

}  // namespace
