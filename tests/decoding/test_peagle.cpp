// P-EAGLE (strategies/peagle): the flattened training forward equals the inference forward at every (anchor, depth)
// (the train/serve parity NeMo Automodel had to fix for positions), COD sampling against its definition, the folder
// round trip in SpecForge's layout, and the trainer learning. (Decoding with peagle is lossless: test_lossless_*, for
// every strategy.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/base/file_bytes.h"
#include "core/io/safetensors.h"
#include "core/training/head_training.h"
#include "model/model_fixtures.h"
#include "strategies/peagle/peagle_head.h"
#include "strategies/peagle/peagle_training.h"
#include "strategies/registry.h"
#include "test_paths.h"

using namespace draftlab;

namespace {

HeadBatch batch_of(const LlamaModel& target, const at::Tensor& windows, const std::vector<int64_t>& layers) {
  HeadBatch b;
  b.windows = windows;
  b.features = head_batch_features(target, windows, layers);
  return b;
}

class PEagleParity : public ::testing::TestWithParam<bool> {};

// Every rollout of a window in one training forward (r = 1) against drafting after the anchor's prefix, the prefix's
// pairs fed in two draft calls (the cache path), for a draft vocabulary of 60 of the 97 ids; with the target's
// embedding and with one of its own.
TEST_P(PEagleParity, EveryRolloutEqualsTheInferenceForwardAfterItsPrefix) {
  const auto target = draftlab::testing::tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Reference);
  PEagleTrainingOptions o;
  o.layers = 2;
  o.depths = 4;
  o.mask_token = 96;
  o.train_embedding = GetParam();
  const at::Tensor ids = std::get<0>(at::randperm(97, at::kLong).narrow(0, 0, 60).sort());
  const PEagleTrainingModel model(*target, 5, ids, o);
  at::manual_seed(3);
  const at::Tensor windows = at::randint(0, 96, {2, 13}, at::kLong);  // T = 12
  const HeadBatch batch = batch_of(*target, windows, model.feature_layers());
  const PEagleRows rows = peagle_cod_rows(12, 4, 1.0, 1.0, 0);
  const at::Tensor training = model.row_logits(batch, rows);  // [2, Q, 60]
  const auto head = model.to_head();
  const int64_t d = 64;
  int64_t compared = 0;
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t a = 1; a < 12; ++a) {
      const int64_t depth = std::min<int64_t>(4, 12 - a);  // rows (a, 0..depth-1) exist: a + d <= T - 1
      PEagleHead::Cache cache = head->make_cache(64);
      const at::Tensor G = batch.features[r].narrow(1, 0, 3 * d);
      std::vector<int64_t> tokens;
      for (int64_t j = 0; j <= a; ++j) tokens.push_back(windows[r][j + 1].item<int64_t>());
      const int64_t split = (a + 1) / 2;  // pairs 0..split-1 first (a one-token draft), then split..a
      head->draft(cache, std::vector<int64_t>(tokens.begin(), tokens.begin() + split), G.narrow(0, 0, split), 1);
      const at::Tensor inference =
          head->draft(cache, std::vector<int64_t>(tokens.begin() + split, tokens.end()), G.narrow(0, split, a + 1 - split),
                      depth).index_select(1, ids);  // [depth, 60]
      EXPECT_EQ(cache.length, a + 1);
      for (int64_t k = 0; k < depth; ++k) {
        int64_t row = -1;
        for (int64_t i = 0; i < rows.size(); ++i)
          if (rows.anchor[static_cast<size_t>(i)] == a && rows.depth[static_cast<size_t>(i)] == k) row = i;
        ASSERT_GE(row, 0);
        EXPECT_TRUE(at::allclose(training[r][row], inference[k], 1e-4, 1e-4))
            << "row " << r << " anchor " << a << " depth " << k << ": max difference "
            << (training[r][row] - inference[k]).abs().max().item<float>();
        ++compared;
      }
    }
  EXPECT_EQ(compared, 2 * (4 * 8 + 3 + 2 + 1));
}

INSTANTIATE_TEST_SUITE_P(Embedding, PEagleParity, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? std::string("Own") : std::string("Target"); });

// SpecForge's generate_cod_sample_indices: depth 0 every position, depth d floor((T - d) max(r^d, r_min)) of the
// rollouts kept at depth d - 1 that stay in the window; the mask: (a, d) sees (a', 0) for a' <= a and (a, d') for
// d' <= d.
TEST(PEagleTraining, CodRowsAndMaskFollowTheirDefinition) {
  const int64_t T = 40, K = 6;
  const PEagleRows rows = peagle_cod_rows(T, K, 0.7, 0.2, 11);
  std::vector<std::set<int64_t>> at_depth(K);
  for (int64_t i = 0; i < rows.size(); ++i) {
    const int64_t a = rows.anchor[static_cast<size_t>(i)], d = rows.depth[static_cast<size_t>(i)];
    EXPECT_TRUE(at_depth[d].insert(a).second) << "(" << a << ", " << d << ") twice";
    EXPECT_LE(a + d, T - 1);
    if (d > 0) EXPECT_TRUE(at_depth[d - 1].count(a)) << "(" << a << ", " << d << ") without its parent";
  }
  EXPECT_EQ(static_cast<int64_t>(at_depth[0].size()), T);
  for (int64_t d = 1; d < K; ++d)
    EXPECT_EQ(static_cast<int64_t>(at_depth[d].size()),
              static_cast<int64_t>(std::floor((T - d) * std::max(std::pow(0.7, d), 0.2) + 1e-9)))
        << "depth " << d;
  const PEagleRows again = peagle_cod_rows(T, K, 0.7, 0.2, 11), other = peagle_cod_rows(T, K, 0.7, 0.2, 12);
  EXPECT_EQ(again.anchor, rows.anchor);
  EXPECT_NE(other.anchor, rows.anchor);
  const at::Tensor mask = peagle_row_mask(rows);
  for (int64_t q = 0; q < rows.size(); ++q)
    for (int64_t k = 0; k < rows.size(); ++k) {
      const int64_t qa = rows.anchor[static_cast<size_t>(q)], qd = rows.depth[static_cast<size_t>(q)];
      const int64_t ka = rows.anchor[static_cast<size_t>(k)], kd = rows.depth[static_cast<size_t>(k)];
      const bool visible = (kd == 0 && ka <= qa) || (ka == qa && kd <= qd);
      ASSERT_EQ(mask[q][k].item<float>() == 0.0f, visible) << "query (" << qa << ", " << qd << "), key (" << ka << ", " << kd << ")";
    }
}

TEST(PEagleHead, SavesAndLoadsSpecForgesLayout) {
  const auto target = draftlab::testing::tiny_model();
  const auto head = PEagleHead::random(*target, 2, 2, 5, 11);
  const std::string dir = draftlab::testing::temp_dir() + "/peagle-head";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  head->save(dir, at::kFloat);
  const auto j = nlohmann::json::parse(read_text_file(dir + "/config.json"));
  EXPECT_EQ(j.at("architectures"), nlohmann::json::array({"PEagleDraftModel"}));
  EXPECT_EQ(j.at("num_hidden_layers"), 2);
  EXPECT_EQ(j.at("mask_token_id"), 11);
  EXPECT_EQ(j.at("pard_token"), 11);
  EXPECT_EQ(j.at("draft_vocab_size"), target->config().vocab_size);
  SafetensorsFile file(dir + "/model.safetensors");
  std::set<std::string> names;
  for (const TensorEntry& e : file.tensors()) names.insert(e.name);
  for (const char* key : {"fc.weight", "mask_hidden", "layers.0.hidden_norm.weight", "layers.0.self_attn.q_proj.weight",
                          "layers.1.mlp.down_proj.weight", "norm.weight", "lm_head.weight", "d2t", "t2d"})
    EXPECT_TRUE(names.count(key)) << key;
  EXPECT_FALSE(names.count("layers.1.hidden_norm.weight"));
  EXPECT_FALSE(names.count("embed_tokens.weight")) << "the target's embedding is not stored";
  EXPECT_EQ(file.find("mask_hidden")->shape, (std::vector<int64_t>{1, 1, 3 * target->config().hidden_size}));
  EXPECT_EQ(file.find("layers.0.self_attn.q_proj.weight")->shape.back(), 2 * target->config().hidden_size);
  const auto back = PEagleHead::load(dir, *target);
  EXPECT_TRUE(at::equal(back->weights().mask_hidden, head->weights().mask_hidden));
  EXPECT_TRUE(at::equal(back->weights().layers[1].w_down, head->weights().layers[1].w_down));
  EXPECT_EQ(back->config().depths, 5);
  // Its folder is P-EAGLE's, not EAGLE-3's (both configs carry draft_vocab_size).
  EXPECT_EQ(&head_family_of(dir), &find_head_family("peagle"));
  // vLLM's key alone names the mask id; a missing layer is named.
  auto vllm = j;
  vllm.erase("mask_token_id");
  vllm.erase("pard_token");
  vllm["ptd_token_id"] = 7;
  write_file_atomically(dir + "/config.json", vllm.dump());
  EXPECT_EQ(PEagleHead::load(dir, *target)->config().mask_token, 7);
  auto broken = j;
  broken["num_hidden_layers"] = 3;
  write_file_atomically(dir + "/config.json", broken.dump());
  try {
    PEagleHead::load(dir, *target);
    FAIL() << "a folder missing layer 2 loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.2."), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(PEagleTraining, LearnsToDraftAPeriodicStream) {
  // A stream of period 5: from the features of the prefix, the mask slots learn the target's next choices. The
  // teacher is the random tiny target, whose top-1 is not a function of the phase alone (positions): 0.93 here after
  // 160 steps (a deterministic run), 0.80 after 120.
  std::vector<int32_t> train, validation;
  for (int i = 0; i < 3000; ++i) train.push_back(10 + (i % 5) * 7);
  for (int i = 0; i < 300; ++i) validation.push_back(10 + (i % 5) * 7);
  const TextDataset data(train, validation);
  const auto target = draftlab::testing::tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Reference);
  PEagleTrainingOptions o;
  o.layers = 1;
  o.depths = 3;
  o.context = 24;
  o.batch = 4;
  o.trainer.steps = 160;
  o.trainer.lr = 3e-3;
  o.trainer.warmup = 5;
  o.trainer.eval_every = 40;
  o.trainer.quiet = true;
  o.out_dir = draftlab::testing::temp_dir() + "/peagle-train";
  std::filesystem::remove_all(o.out_dir);
  const auto result = train_peagle_head(*target, o, data);
  const auto* alpha = result.curves.metric("alpha");
  ASSERT_NE(alpha, nullptr);
  EXPECT_GT(alpha->back().at(2), 0.85) << "share of anchors whose three rows all agree with the target after training";
  EXPECT_LT(alpha->front().at(2), 0.5) << "before training";
  const auto head = PEagleHead::load(o.out_dir, *target);
  EXPECT_EQ(head->config().mask_token, 96) << "the highest id absent from the data";
  EXPECT_EQ(head->config().depths, 3);
  std::filesystem::remove_all(o.out_dir);
}

}  // namespace
