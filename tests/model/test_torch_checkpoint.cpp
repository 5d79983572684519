// pytorch_model.bin (torch.save) reading and `convert-head`: scripts/make_torch_checkpoint.py writes a tiny
// EAGLE head exactly as torch.save lays one out (stdlib pickle + zip, with a transposed view, a shared storage and
// a float16 tensor) together with the values it wrote; the converted safetensors must hold those values, and the
// converted folder must load as an EagleHead on a target of that shape.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/io/safetensors.h"
#include "strategies/eagle/eagle_head.h"
#include "core/model/torch_checkpoint.h"
#include "model_fixtures.h"
#include "test_paths.h"

namespace draftlab {
namespace {

class TorchCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 not found: cannot write the file";
    dir = testing::temp_dir() + "/torch_checkpoint";
    std::filesystem::remove_all(dir);
    const std::string cmd = "/usr/bin/python3 " + testing::source_path("scripts/make_torch_checkpoint.py") + " " + dir;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    expected = nlohmann::ordered_json::parse(std::ifstream(dir + "/expected.json"));  // the script's (file) order
  }
  std::string dir;
  nlohmann::ordered_json expected;
};

TEST_F(TorchCheckpoint, ReadsEveryTensorAsWritten) {
  const auto tensors = read_torch_state_dict(dir + "/pytorch_model.bin");
  ASSERT_EQ(tensors.size(), expected.size());
  auto it = expected.begin();
  for (const auto& [name, t] : tensors) {  // file order is the script's order
    EXPECT_EQ(name, it.key());
    const auto& e = it.value();
    EXPECT_EQ(t.sizes().vec(), e["shape"].get<std::vector<int64_t>>()) << name;
    EXPECT_EQ(t.scalar_type(), e["dtype"] == "float16" ? at::kHalf : at::kFloat) << name;
    const auto values = e["values"].get<std::vector<double>>();
    const auto want = at::tensor(values, at::TensorOptions().dtype(at::kDouble)).view(t.sizes());
    EXPECT_TRUE(at::equal(t.to(at::kDouble), want)) << name;  // float32/16 values are exact in double
    ++it;
  }
}

TEST_F(TorchCheckpoint, ConvertedFolderHoldsTheValuesAndLoadsAsAHead) {
  const std::string out = dir + "/converted";
  EXPECT_EQ(convert_torch_checkpoint(dir + "/pytorch_model.bin", out), static_cast<int64_t>(expected.size()));
  SafetensorsFile file(out + "/model.safetensors");
  for (const auto& [name, e] : expected.items()) {
    const TensorEntry* t = file.find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape, e["shape"].get<std::vector<int64_t>>()) << name;
    EXPECT_EQ(t->dtype, e["dtype"] == "float16" ? DType::F16 : DType::F32) << name;
    const auto values = e["values"].get<std::vector<double>>();
    ASSERT_EQ(static_cast<size_t>(t->nbytes), values.size() * (t->dtype == DType::F16 ? 2 : 4)) << name;
    auto raw = at::from_blob(const_cast<uint8_t*>(t->data), {static_cast<int64_t>(values.size())},
                             t->dtype == DType::F16 ? at::kHalf : at::kFloat);
    EXPECT_TRUE(at::equal(raw.to(at::kDouble), at::tensor(values, at::TensorOptions().dtype(at::kDouble)))) << name;
  }
  ASSERT_TRUE(std::filesystem::exists(out + "/config.json"));

  // The script's default shape is tiny_config's: the converted head loads on that target (embed_tokens.weight
  // ignored), and its fc is the transposed storage read back in the right order.
  auto target = testing::tiny_model();
  const auto head = EagleHead::load(out, *target);
  const auto fc = expected["fc.weight"]["values"].get<std::vector<double>>();
  EXPECT_TRUE(at::equal(head->weights().fc.to(at::kDouble),
                        at::tensor(fc, at::TensorOptions().dtype(at::kDouble)).view({64, 128})));
  EXPECT_EQ(head->input_variant(), kEagleInputFeatureShiftedToken);
}

TEST_F(TorchCheckpoint, NonArchivesAreClearErrors) {
  const std::string bad = dir + "/config.json";
  try {
    read_torch_state_dict(bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("zip"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_torch_state_dict(dir + "/missing.bin"), Error);
}

}  // namespace
}  // namespace draftlab
