// Medusa heads: the logits on both CPU paths against a plain double-precision computation of h + SiLU(W h + b)
// and the LM head, the folder written by save() loading back bit for bit, the official v0.1 layout (bare state-dict
// names in medusa_lm_head.safetensors), every load error naming its file, tensor and expected shape, and the head
// kind read off a folder's config.json.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/io/safetensors.h"
#include "strategies/head_family.h"
#include "strategies/medusa/medusa_heads.h"
#include "model_fixtures.h"
#include "test_errors.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using testing::expect_error;

using testing::fresh_dir;

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

MedusaConfig config(int64_t heads, int64_t layers, bool own) {
  MedusaConfig c;
  c.num_heads = heads;
  c.num_layers = layers;
  c.own_lm_head = own;
  return c;
}

// Head k's logits from f in double precision, one scalar at a time: h_i += silu(sum_j W_ij h_j + b_i), then
// logits_v = sum_i L_vi h_i.
std::vector<double> naive_logits(const MedusaHeads& heads, int64_t k, const at::Tensor& f_in) {
  const int64_t d = f_in.numel();
  auto f = f_in.to(at::kDouble).contiguous();
  std::vector<double> h(f.data_ptr<double>(), f.data_ptr<double>() + d);
  for (const auto& block : heads.weights().blocks[k]) {
    const auto W = block.weight.to(at::kDouble).contiguous();
    const auto b = block.bias.to(at::kDouble).contiguous();
    std::vector<double> y(d);
    for (int64_t i = 0; i < d; ++i) {
      double s = b.data_ptr<double>()[i];
      for (int64_t j = 0; j < d; ++j) s += W.data_ptr<double>()[i * d + j] * h[j];
      y[i] = s / (1.0 + std::exp(-s));
    }
    for (int64_t i = 0; i < d; ++i) h[i] += y[i];
  }
  const auto L = (heads.weights().lm_heads.empty() ? heads.target().weights().lm_head : heads.weights().lm_heads[k])
                     .to(at::kDouble)
                     .contiguous();
  std::vector<double> out(L.size(0));
  for (int64_t v = 0; v < L.size(0); ++v) {
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += L.data_ptr<double>()[v * d + i] * h[i];
    out[v] = s;
  }
  return out;
}

TEST(MedusaHeads, LogitsOnBothPathsMatchAPlainComputation) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const auto f = at::randn({64}, gen, at::TensorOptions().dtype(at::kFloat));
  for (CpuPath path : {CpuPath::Native, CpuPath::Reference})
    for (bool own : {false, true}) {
      SCOPED_TRACE(std::string(path == CpuPath::Native ? "native" : "reference") + (own ? ", own" : ", shared"));
      auto target = testing::tiny_model(at::kFloat, 2, 7, false, 97, path);
      // weight_std 0.3: blocks far from the identity, so a wrong block order or a missing bias shows.
      const auto heads = MedusaHeads::random(*target, 5, config(3, 2, own), 0.3);
      const auto logits = heads->logits(f);
      ASSERT_EQ(logits.sizes().vec(), (std::vector<int64_t>{3, 97}));
      for (int64_t k = 0; k < 3; ++k) {
        const auto want = naive_logits(*heads, k, f);
        for (int64_t v = 0; v < 97; ++v)
          ASSERT_NEAR(logits[k][v].item<double>(), want[v], 1e-3 * (1 + std::abs(want[v]))) << "head " << k << " token " << v;
      }
      // The first heads alone are the same rows.
      EXPECT_TRUE(at::equal(heads->logits(f.unsqueeze(0), 2), logits.narrow(0, 0, 2)));
    }
}

TEST(MedusaHeads, RandomHeadsAreDeterministicAndOfficiallyInitialised) {
  auto target = testing::tiny_model();
  const auto a = MedusaHeads::random(*target, 9, config(2, 1, true), 0.0);
  const auto b = MedusaHeads::random(*target, 9, config(2, 1, true), 0.0);
  EXPECT_TRUE(at::equal(a->weights().blocks[1][0].bias, b->weights().blocks[1][0].bias));
  EXPECT_TRUE(at::equal(a->weights().blocks[0][0].weight, at::zeros({64, 64})));  // the official zero init
  EXPECT_LE(a->weights().blocks[0][0].bias.abs().max().item<double>(), 1.0 / 8.0);  // U(-1/sqrt(d), 1/sqrt(d))
  EXPECT_TRUE(at::equal(a->weights().lm_heads[1], target->weights().lm_head));  // copied from the target
  EXPECT_EQ(a->num_parameters(), 2 * (64 * 64 + 64 + 97 * 64));
}

TEST(MedusaHeads, SavedFolderLoadsBitForBit) {
  auto target = testing::tiny_model();
  for (bool own : {false, true}) {
    const auto heads = MedusaHeads::random(*target, 11, config(3, 2, own), 0.1);
    const std::string dir = fresh_dir(own ? "medusa_own" : "medusa_shared");
    heads->save(dir);
    EXPECT_EQ(head_family_of(dir).name, "medusa");
    const auto loaded = MedusaHeads::load(dir, *target);
    EXPECT_EQ(loaded->config().own_lm_head, own);
    EXPECT_EQ(loaded->config().num_layers, 2);
    ASSERT_EQ(loaded->num_heads(), 3);
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t j = 0; j < 2; ++j) {
        EXPECT_TRUE(at::equal(loaded->weights().blocks[k][j].weight, heads->weights().blocks[k][j].weight));
        EXPECT_TRUE(at::equal(loaded->weights().blocks[k][j].bias, heads->weights().blocks[k][j].bias));
      }
    const auto f = at::randn({64});
    EXPECT_TRUE(at::equal(loaded->logits(f), heads->logits(f)));
    SafetensorsFile file(dir + "/model.safetensors");
    std::vector<std::string> names;
    for (const auto& e : file.tensors()) names.push_back(e.name);
    std::sort(names.begin(), names.end());
    auto keys = MedusaHeads::checkpoint_keys(loaded->config());
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(names, keys);
  }
  // float16 files hold the float16-rounded weights.
  const auto heads = MedusaHeads::random(*target, 12, config(1, 1, false), 0.1);
  const std::string dir = fresh_dir("medusa_f16");
  heads->save(dir, at::kHalf);
  const auto loaded = MedusaHeads::load(dir, *target);
  EXPECT_TRUE(at::equal(loaded->weights().blocks[0][0].weight,
                        heads->weights().blocks[0][0].weight.to(at::kHalf).to(at::kFloat)));
}

// The v0.1 releases: torch.save(medusa_head.state_dict()) has bare names "{k}.{j}.linear.weight", and an own LM
// head "{k}.{L}.weight"; their config.json has no sizes and no draftlab keys.
TEST(MedusaHeads, LoadsTheOfficialBareLayout) {
  auto target = testing::tiny_model();
  const auto heads = MedusaHeads::random(*target, 13, config(2, 1, true), 0.1);
  std::vector<at::Tensor> keep;
  std::vector<TensorToWrite> entries;
  auto add = [&](const std::string& name, const at::Tensor& t) {
    keep.push_back(t.contiguous());
    entries.push_back({name, DType::F32, t.sizes().vec(), keep.back().data_ptr(), static_cast<size_t>(keep.back().nbytes())});
  };
  for (int k = 0; k < 2; ++k) {
    add(std::to_string(k) + ".0.linear.weight", heads->weights().blocks[k][0].weight);
    add(std::to_string(k) + ".0.linear.bias", heads->weights().blocks[k][0].bias);
    add(std::to_string(k) + ".1.weight", heads->weights().lm_heads[k]);
  }
  const std::string dir = fresh_dir("medusa_official");
  write_safetensors(dir + "/medusa_lm_head.safetensors", entries);
  write_text(dir + "/config.json",
             R"({"medusa_num_heads": 2, "medusa_num_layers": 1, "base_model_name_or_path": "lmsys/vicuna-7b-v1.3"})");
  const auto loaded = MedusaHeads::load(dir, *target);
  EXPECT_TRUE(loaded->config().own_lm_head);
  const auto f = at::randn({64});
  EXPECT_TRUE(at::equal(loaded->logits(f), heads->logits(f)));
}

TEST(MedusaHeads, LoadErrorsNameFileTensorAndExpectedShape) {
  auto target = testing::tiny_model();
  const auto heads = MedusaHeads::random(*target, 14, config(2, 1, false), 0.1);
  const std::string good = fresh_dir("medusa_good");
  heads->save(good);
  const std::string weights = good + "/model.safetensors";

  // A folder whose model.safetensors holds `entries` (names and shapes of our choosing) and config.json `config`.
  auto folder = [&](const std::string& name, const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors,
                    const std::string& config_text) {
    const std::string dir = fresh_dir(name);
    std::vector<at::Tensor> keep;
    std::vector<TensorToWrite> entries;
    for (const auto& [n, shape] : tensors) {
      keep.push_back(at::zeros(shape));
      entries.push_back({n, DType::F32, shape, keep.back().data_ptr(), static_cast<size_t>(keep.back().nbytes())});
    }
    write_safetensors(dir + "/model.safetensors", entries);
    write_text(dir + "/config.json", config_text);
    return dir;
  };
  const std::string two = R"({"medusa_num_heads": 2, "medusa_num_layers": 1})";
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shared = {
      {"medusa_head.0.0.linear.weight", {64, 64}}, {"medusa_head.0.0.linear.bias", {64}},
      {"medusa_head.1.0.linear.weight", {64, 64}}, {"medusa_head.1.0.linear.bias", {64}}};

  auto wrong_shape = shared;
  wrong_shape[2].second = {64, 32};
  std::string dir = folder("medusa_wrong_shape", wrong_shape, two);
  expect_error([&] { MedusaHeads::load(dir, *target); },
               {dir + "/model.safetensors", "medusa_head.1.0.linear.weight", "[64, 64]", "[64, 32]"});

  auto missing = shared;
  missing.pop_back();
  dir = folder("medusa_missing", missing, two);
  expect_error([&] { MedusaHeads::load(dir, *target); },
               {dir + "/model.safetensors", "'medusa_head.1.0.linear.bias' not found", "[64]"});

  auto extra = shared;
  extra.push_back({"medusa_head.2.0.linear.weight", {64, 64}});
  dir = folder("medusa_extra_head", extra, two);
  expect_error([&] { MedusaHeads::load(dir, *target); },
               {dir + "/model.safetensors", "unexpected tensor 'medusa_head.2.0.linear.weight'", "medusa_num_heads 2"});

  auto own = shared;
  own.push_back({"medusa_head.0.1.weight", {97, 64}});
  own.push_back({"medusa_head.1.1.weight", {50, 64}});  // vocabulary of another model
  dir = folder("medusa_own_vocab", own, two);
  expect_error([&] { MedusaHeads::load(dir, *target); }, {"medusa_head.1.1.weight", "[97, 64]", "[50, 64]"});

  dir = folder("medusa_lm_flag", shared, R"({"medusa_num_heads": 2, "draftlab_lm_head": "own"})");
  expect_error([&] { MedusaHeads::load(dir, *target); }, {"medusa_head.0.1.weight", "not found", "draftlab_lm_head"});

  dir = folder("medusa_hidden", shared, R"({"medusa_num_heads": 2, "hidden_size": 128})");
  expect_error([&] { MedusaHeads::load(dir, *target); }, {dir + "/config.json", "hidden_size", "64", "128"});
  dir = folder("medusa_vocab", shared, R"({"medusa_num_heads": 2, "vocab_size": 32000})");
  expect_error([&] { MedusaHeads::load(dir, *target); }, {dir + "/config.json", "vocab_size", "97", "32000"});
  dir = folder("medusa_no_heads", shared, R"({"medusa_num_layers": 1})");
  expect_error([&] { MedusaHeads::load(dir, *target); }, {dir + "/config.json", "medusa_num_heads"});

  // Truncated weights: the safetensors reader names the file.
  dir = fresh_dir("medusa_truncated");
  std::filesystem::copy_file(good + "/config.json", dir + "/config.json");
  {
    std::ifstream in(weights, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir + "/model.safetensors", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  expect_error([&] { MedusaHeads::load(dir, *target); }, {dir + "/model.safetensors"});

  dir = fresh_dir("medusa_pt_only");
  write_text(dir + "/config.json", two);
  write_text(dir + "/medusa_lm_head.pt", "not read");
  expect_error([&] { MedusaHeads::load(dir, *target); }, {"medusa_lm_head.pt", "convert-head"});

  dir = fresh_dir("medusa_no_config");
  std::filesystem::copy_file(weights, dir + "/model.safetensors");
  expect_error([&] { MedusaHeads::load(dir, *target); }, {dir + "/config.json", "not found"});
  expect_error([&] { MedusaHeads::load(testing::temp_dir() + "/nothing_here", *target); }, {"nothing_here", "not found"});
}

TEST(HeadFamily, ReadsTheFolderConfig) {
  EXPECT_EQ(head_family_of(testing::source_path("data/models/ts-tiny-eagle-head")).name, "eagle");
  EXPECT_EQ(head_family_of(testing::source_path("data/models/ts-tiny-eagle-head/model.safetensors")).name, "eagle");
  const std::string hydra = fresh_dir("hydra_kind");
  write_text(hydra + "/config.json", R"({"hydra_num_heads": 4, "hydra_num_layers": 1, "hydra_head_arch": "mlp"})");
  EXPECT_EQ(head_family_of(hydra).name, "hydra");
  const std::string medusa = fresh_dir("medusa_kind");
  write_text(medusa + "/config.json", R"({"medusa_num_heads": 5})");
  EXPECT_EQ(head_family_of(medusa).name, "medusa");
  // EAGLE-3: the official config (a Llama config with draft_vocab_size), or a third-party architecture name; an
  // EAGLE-1/2 head with a reduced vocabulary also has draft_vocab_size, beside draftlab's own input key.
  const std::string eagle3 = fresh_dir("eagle3_kind");
  write_text(eagle3 + "/config.json", R"({"hidden_size": 64, "draft_vocab_size": 32})");
  EXPECT_EQ(head_family_of(eagle3).name, "eagle3");
  write_text(eagle3 + "/config.json", R"({"architectures": ["LlamaForCausalLMEagle3"]})");
  EXPECT_EQ(head_family_of(eagle3).name, "eagle3");
  write_text(eagle3 + "/config.json", R"({"draft_vocab_size": 32, "draftlab_eagle_input": "feature_only"})");
  EXPECT_EQ(head_family_of(eagle3).name, "eagle");
  EXPECT_EQ(head_family_of(testing::temp_dir() + "/no_such_head").name, "eagle");
  const std::string broken = fresh_dir("broken_kind");
  write_text(broken + "/config.json", "{\"medusa_num_heads\": ");
  expect_error([&] { head_family_of(broken); }, {broken + "/config.json", "valid JSON"});
  EXPECT_EQ(find_head_family("medusa").title, "Medusa heads");
  expect_error([] { find_head_family("lookahead"); }, {"eagle, medusa, hydra, eagle3, peagle, dflash", "lookahead"});
}

}  // namespace
}  // namespace draftlab
