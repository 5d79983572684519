// DFlash (strategies/dflash): the training forward of every block equals the inference forward after committing its
// anchor's prefix (the bug class behind "training accuracy 0.98, acceptance 0.10"), the folder round trip in z-lab's
// layout, DDTree's best-first tree against brute force, and the trainer learning. (Decoding with dflash is lossless:
// test_lossless_*, for every strategy.)
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/base/file_bytes.h"
#include "core/training/head_training.h"
#include "model/model_fixtures.h"
#include "strategies/dflash/dflash_head.h"
#include "strategies/dflash/dflash_training.h"
#include "strategies/registry.h"
#include "test_paths.h"

using namespace draftlab;

namespace {

// The target's features of a window as train-head hands them over (feature layers, then the final hidden state).
HeadBatch batch_of(const LlamaModel& target, const at::Tensor& windows, const std::vector<int64_t>& layers) {
  HeadBatch b;
  b.windows = windows;
  b.features = head_batch_features(target, windows, layers);
  return b;
}

TEST(DFlashTraining, EveryBlockEqualsTheInferenceForwardAfterItsPrefix) {
  const auto target = draftlab::testing::tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Reference);
  DFlashTrainingOptions o;
  o.block_size = 4;
  o.layers = 2;
  o.anchors = 100;
  o.mask_token = 96;
  const DFlashTrainingModel model(*target, 5, o);
  at::manual_seed(3);
  const at::Tensor windows = at::randint(0, 96, {2, 13}, at::kLong);  // T = 12
  const HeadBatch batch = batch_of(*target, windows, model.feature_layers());
  std::vector<int64_t> anchors;
  for (int64_t a = 1; a + 4 <= 13; ++a) anchors.push_back(a);  // every anchor with its labels in the window
  const at::Tensor training = model.block_logits(batch, anchors);  // [2, A, 3, V]
  const auto head = model.to_head();
  const int64_t k = static_cast<int64_t>(head->config().target_layer_ids.size()), d = 64;
  for (int64_t r = 0; r < 2; ++r)
    for (size_t j = 0; j < anchors.size(); ++j) {
      const int64_t a = anchors[j];
      DFlashHead::Context context = head->make_context(64);
      // Context as inference builds it: the prefix's features, in two calls (prompt, then a verification).
      const at::Tensor f = batch.features[r].narrow(1, 0, k * d);
      head->extend(context, f.narrow(0, 0, (a + 1) / 2));
      head->extend(context, f.narrow(0, (a + 1) / 2, a - (a + 1) / 2));
      const at::Tensor inference = head->draft(context, windows[r][a].item<int64_t>(), 4);  // [3, V]
      EXPECT_TRUE(at::allclose(training[r][static_cast<int64_t>(j)], inference, 1e-4, 1e-4))
          << "row " << r << " anchor " << a << ": max difference "
          << (training[r][static_cast<int64_t>(j)] - inference).abs().max().item<float>();
    }
}

TEST(DFlashHead, SavesAndLoadsZLabsLayout) {
  const auto target = draftlab::testing::tiny_model();
  const auto head = DFlashHead::random(*target, 2, 2, 6, 11);
  const std::string dir = draftlab::testing::temp_dir() + "/dflash-head";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  head->save(dir, at::kFloat);
  const auto j = nlohmann::json::parse(read_text_file(dir + "/config.json"));
  EXPECT_EQ(j.at("architectures"), nlohmann::json::array({"DFlashDraftModel"}));
  EXPECT_EQ(j.at("block_size"), 6);
  EXPECT_EQ(j.at("dflash_config").at("mask_token_id"), 11);
  EXPECT_EQ(j.at("dflash_config").at("target_layer_ids"), nlohmann::json(head->config().target_layer_ids));
  const auto back = DFlashHead::load(dir, *target);
  EXPECT_TRUE(at::equal(back->weights().layers[1].k_norm, head->weights().layers[1].k_norm));
  EXPECT_TRUE(at::equal(back->weights().fc, head->weights().fc));
  EXPECT_EQ(&head_family_of(dir), &find_head_family("dflash"));
  // A missing tensor is named.
  auto broken = j;
  broken["num_hidden_layers"] = 3;
  write_file_atomically(dir + "/config.json", broken.dump());
  try {
    DFlashHead::load(dir, *target);
    FAIL() << "a folder missing layer 2 loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.2."), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// DDTree's nodes are the `budget` most probable paths of the lattice of per-slot top tokens (a path's value: the
// product of its tokens' slot probabilities), found here by enumerating every path of the top 3 per slot.
TEST(DFlashStrategy, DDTreeHoldsTheMostProbablePaths) {
  const auto target = draftlab::testing::tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Reference);
  auto strategy = make_strategy("dflash", StrategyContext{*target},
                                StrategyOptions::parse({"block_size=4", "ddtree_nodes=7", "head_seed=4"}));
  auto head = DFlashHead::random(*target, 4, 1, 4);
  std::vector<int64_t> prompt{1, 5, 9, 13};
  std::vector<int64_t> layers = head->config().target_layer_ids;
  ForwardOptions fo;
  fo.feature_layers = layers;
  KvCache cache = target->make_cache(32);
  const at::Tensor features = target->forward_chain(cache, prompt, fo).features;
  strategy->begin(prompt, features, 0);
  std::vector<int64_t> seq = prompt;
  seq.push_back(20);
  Sampler greedy{SamplingParams{}};
  const DraftTree tree = propose_one(*strategy, DraftRequest{seq, 100, 100, greedy});
  ASSERT_EQ(tree.size(), 7);
  // Brute force over the same head's slot distributions.
  DFlashHead::Context context = head->make_context(32);
  head->extend(context, features);
  const at::Tensor p = at::softmax(head->draft(context, 20, 4), -1);  // [3, V]
  const auto [top, ids] = p.topk(3, -1);
  std::vector<double> values;
  for (int depth = 1; depth <= 3; ++depth) {
    std::vector<int> r(depth, 0);
    while (true) {
      double v = 1;
      for (int s = 0; s < depth; ++s) v *= top[s][r[s]].item<double>();
      values.push_back(v);
      int s = depth - 1;
      while (s >= 0 && ++r[s] == 3) r[s--] = 0;
      if (s < 0) break;
    }
  }
  std::sort(values.rbegin(), values.rend());
  std::vector<double> got;
  for (const DraftNode& n : tree.nodes()) got.push_back(n.value);
  std::sort(got.rbegin(), got.rend());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], values[i], 1e-5) << "node " << i;
  // A node's token is one of its slot's top tokens, and no two siblings repeat one.
  for (int32_t i = 0; i < tree.size(); ++i) {
    const DraftNode& n = tree.node(i);
    EXPECT_TRUE(ids[n.depth - 1].eq(n.token).any().item<bool>()) << "node " << i;
    for (int32_t j = 0; j < i; ++j)
      EXPECT_FALSE(tree.node(j).parent == n.parent && tree.node(j).token == n.token) << "nodes " << j << ", " << i;
  }
}

// ddtree_nodes=auto verifies the part of DDTree's tree (max_auto_nodes) that pays most: with verification free per row
// (auto_cost 1/0/0) the whole tree, the same as ddtree_nodes=7; at 10 ms a row (1/10/0) a node would need a chance
// above .9 to pay (1 + e tokens in 21 ms against 1 in 11): a random head's nodes never do, so nothing is verified.
TEST(DFlashStrategy, DDTreeAutoVerifiesThePartThatPays) {
  const auto target = draftlab::testing::tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Reference);
  auto head = DFlashHead::random(*target, 4, 1, 4);
  const std::vector<int64_t> prompt{1, 5, 9, 13};
  ForwardOptions fo;
  fo.feature_layers = head->config().target_layer_ids;
  KvCache cache = target->make_cache(32);
  const at::Tensor features = target->forward_chain(cache, prompt, fo).features;
  std::vector<int64_t> seq = prompt;
  seq.push_back(20);
  Sampler greedy{SamplingParams{}};
  const auto first_tree = [&](std::vector<std::string> options) {
    options.insert(options.end(), {"block_size=4", "head_seed=4"});
    auto strategy = make_strategy("dflash", StrategyContext{*target}, StrategyOptions::parse(options));
    strategy->begin(prompt, features, 0);
    return propose_one(*strategy, DraftRequest{seq, 100, 100, greedy});
  };
  const DraftTree fixed = first_tree({"ddtree_nodes=7"});
  const DraftTree free_rows = first_tree({"ddtree_nodes=auto", "max_auto_nodes=7", "auto_cost=1/0/0"});
  ASSERT_EQ(free_rows.size(), fixed.size());
  for (int32_t i = 0; i < fixed.size(); ++i) {
    EXPECT_EQ(free_rows.node(i).token, fixed.node(i).token) << i;
    EXPECT_EQ(free_rows.node(i).parent, fixed.node(i).parent) << i;
  }
  EXPECT_EQ(first_tree({"ddtree_nodes=auto", "max_auto_nodes=7", "auto_cost=1/10/0"}).size(), 0);
}

TEST(DFlashTraining, LearnsToDraftAPeriodicStream) {
  // A stream of period 5: from the features of the prefix, the block's slots learn the next three tokens.
  std::vector<int32_t> train, validation;
  for (int i = 0; i < 3000; ++i) train.push_back(10 + (i % 5) * 7);
  for (int i = 0; i < 300; ++i) validation.push_back(10 + (i % 5) * 7);
  const TextDataset data(train, validation);
  const auto target = draftlab::testing::tiny_model(at::kFloat, 2, 7, false, 97, CpuPath::Reference);
  DFlashTrainingOptions o;
  o.block_size = 4;
  o.anchors = 8;
  o.context = 24;
  o.batch = 4;
  o.trainer.steps = 80;
  o.trainer.lr = 3e-3;
  o.trainer.warmup = 5;
  o.trainer.eval_every = 80;
  o.trainer.quiet = true;
  o.out_dir = draftlab::testing::temp_dir() + "/dflash-train";
  std::filesystem::remove_all(o.out_dir);
  const auto result = train_dflash_head(*target, o, data);
  const auto* alpha = result.curves.metric("alpha");
  ASSERT_NE(alpha, nullptr);
  EXPECT_GT(alpha->back().at(2), 0.9) << "share of blocks whose three slots all agree after training";
  EXPECT_LT(alpha->front().at(0), 0.5) << "before training";
  // The mask id: the highest id absent from the data, recorded in the saved folder.
  const auto head = DFlashHead::load(o.out_dir, *target);
  EXPECT_EQ(head->config().mask_token, 96);
  std::filesystem::remove_all(o.out_dir);
}

}  // namespace
