// Checkpoint round trips and bad checkpoints, through the model loader.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_errors.h"
#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/safetensors.h"
#include "model_fixtures.h"
#include "test_paths.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

std::string fresh_dir(const std::string& name) {
  std::string d = temp_dir() + "/" + name;
  std::string cmd = "rm -rf '" + d + "' && mkdir -p '" + d + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return d;
}

at::Tensor logits_of(const LlamaModel& m, const std::vector<int64_t>& seq) {
  KvCache cache = m.make_cache(static_cast<int64_t>(seq.size()));
  return m.forward_chain(cache, seq).logits;
}

const std::vector<int64_t> kSeq{1, 17, 33, 5, 60, 2, 91, 44};

TEST(Checkpoints, SafetensorsRoundTripGivesIdenticalLogits) {
  for (bool tied : {false, true}) {
    auto model = tiny_model(at::kFloat, 2, 11, tied);
    std::string dir = fresh_dir(tied ? "rt_tied" : "rt");
    model->save_hf(dir, at::kFloat);
    auto loaded = LlamaModel::load(dir, ComputeOptions{});
    EXPECT_TRUE(at::equal(logits_of(*model, kSeq), logits_of(*loaded, kSeq))) << "tied=" << tied;
    // The .safetensors file path works as well as the folder.
    auto by_file = LlamaModel::load(dir + "/model.safetensors", ComputeOptions{});
    EXPECT_TRUE(at::equal(logits_of(*model, kSeq), logits_of(*by_file, kSeq)));
  }
}

TEST(Checkpoints, HalfPrecisionFilesLoadAsTheirRoundedWeights) {
  auto model = tiny_model();
  for (auto file_dtype : {at::kHalf, at::kBFloat16}) {
    std::string dir = fresh_dir(file_dtype == at::kHalf ? "f16" : "bf16");
    model->save_hf(dir, file_dtype);
    auto loaded = LlamaModel::load(dir, ComputeOptions{});
    // Independent expectation: every weight rounded through the file dtype.
    for (const auto& [name, t] : hf_named_tensors(loaded->config(), loaded->weights(), at::kFloat)) {
      auto original = hf_named_tensors(model->config(), model->weights(), file_dtype);
      for (const auto& [oname, ot] : original)
        if (oname == name) EXPECT_TRUE(at::equal(ot.to(at::kFloat), t)) << name;
    }
  }
}

TEST(Checkpoints, Llama2cAndItsHfExportGiveIdenticalLogits) {
  DRAFTLAB_REQUIRE_SHARED("models/stories260K/stories260K.bin");
  // stories260K: GQA (8 heads, 4 kv heads) and an untied classifier; q/k rows permuted at load.
  auto bin = LlamaModel::load(shared_path("models/stories260K/stories260K.bin"), ComputeOptions{});
  std::string dir = fresh_dir("stories_hf");
  bin->save_hf(dir, at::kFloat);
  auto hf = LlamaModel::load(dir, ComputeOptions{});
  EXPECT_TRUE(at::equal(logits_of(*bin, kSeq), logits_of(*hf, kSeq)));
}

TEST(Checkpoints, ShapeDisagreeingWithConfigNamesTensorAndShapes) {
  auto model = tiny_model();
  std::string dir = fresh_dir("bad_shape");
  model->save_hf(dir, at::kFloat);
  auto j = nlohmann::json::parse(read_text_file(dir + "/config.json"));
  j["intermediate_size"] = 100;
  write_file_atomically(dir + "/config.json", j.dump());
  expect_error([&] { LlamaModel::load(dir, ComputeOptions{}); },
                        {"model.safetensors", "model.layers.0.mlp.gate_proj.weight", "[100, 64]", "[96, 64]"});
}

TEST(Checkpoints, MissingTensorAndMissingConfigAreNamed) {
  auto model = tiny_model(at::kFloat, 2, 7, /*tied=*/false);
  std::string dir = fresh_dir("missing");
  model->save_hf(dir, at::kFloat);
  // Rewrite the file without lm_head.
  std::vector<std::pair<std::string, at::Tensor>> keep;
  for (auto& nt : hf_named_tensors(model->config(), model->weights(), at::kFloat))
    if (nt.first != "lm_head.weight") keep.push_back(nt);
  std::vector<TensorToWrite> entries;
  for (auto& [n, t] : keep) entries.push_back({n, DType::F32, t.sizes().vec(), t.data_ptr(), (size_t)t.nbytes()});
  write_safetensors(dir + "/model.safetensors", entries);
  expect_error([&] { LlamaModel::load(dir, ComputeOptions{}); }, {"lm_head.weight", "tie_word_embeddings"});

  std::remove((dir + "/config.json").c_str());
  expect_error([&] { LlamaModel::load(dir, ComputeOptions{}); }, {"config.json", "not found"});
  expect_error([&] { LlamaModel::load(dir + "/nope", ComputeOptions{}); }, {"nope", "not found"});
}

TEST(Checkpoints, TruncatedFilesFailCleanly) {
  DRAFTLAB_REQUIRE_SHARED("models/aidreams260K/aidreams260K.bin");
  std::ifstream in(shared_path("models/aidreams260K/aidreams260K.bin"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string bin = fresh_dir("trunc") + "/cut.bin";
  write_file_atomically(bin, bytes.substr(0, bytes.size() / 2));
  expect_error([&] { LlamaModel::load(bin, ComputeOptions{}); }, {"cut.bin", "bytes"});

  auto model = tiny_model();
  std::string dir = fresh_dir("trunc_st");
  model->save_hf(dir, at::kFloat);
  std::string st = read_text_file(dir + "/model.safetensors");
  write_file_atomically(dir + "/model.safetensors", st.substr(0, st.size() - 100));
  expect_error([&] { LlamaModel::load(dir, ComputeOptions{}); }, {"model.safetensors"});
}

TEST(Checkpoints, Float16OnCpuIsAClearError) {
  ComputeOptions o;
  o.dtype = at::kHalf;
  expect_error([&] { check_supported(o); }, {"float16", "CPU"});
}

}  // namespace
