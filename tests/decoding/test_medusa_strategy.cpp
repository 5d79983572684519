// The medusa strategy: each node of its tree holds head (depth - 1)'s ranked token with that head's probability,
// read from the right feature (the prompt's last, then the last verified one); trees are cut to the heads, the
// request and the vocabulary; the tree options are checked; and decoding stays vanilla's on a tiny model. (The full
// losslessness suites run its test variants: tests/decoding/test_lossless_*.cpp.)
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <filesystem>

#include "core/decoding/speculative_decoder.h"
#include "core/decoding/vanilla_decoder.h"
#include "strategies/medusa/medusa_heads.h"
#include "model/model_fixtures.h"
#include "strategies/parallel_heads/parallel_heads.h"
#include "strategies/registry.h"
#include "test_errors.h"
#include "test_paths.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

std::string saved_heads(const LlamaModel& target, const std::string& name, int64_t heads, bool own) {
  const std::string dir = temp_dir() + "/" + name;
  std::filesystem::create_directories(dir);
  MedusaConfig c;
  c.num_heads = heads;
  c.own_lm_head = own;
  MedusaHeads::random(target, 21, c, 0.3)->save(dir);
  return dir;
}

std::unique_ptr<DraftStrategy> medusa(const LlamaModel& target, const std::vector<std::string>& options) {
  return make_strategy("medusa", StrategyContext{target}, StrategyOptions::parse(options));
}

// The path of sibling ranks of each node, read off the tree (ranks among the parent's children).
std::vector<int32_t> path_of(const DraftTree& tree, int32_t i) {
  std::vector<int32_t> p;
  for (; i >= 0; i = tree.node(i).parent) p.insert(p.begin(), tree.node(i).sibling_rank);
  return p;
}

DraftTree propose(DraftStrategy& s, std::vector<int64_t> sequence, int32_t max_nodes = 1000, int32_t wanted = 100) {
  Sampler sampler(SamplingParams{});
  return propose_one(s, DraftRequest{sequence, max_nodes, wanted, sampler});
}

// Node i must be spec path i, holding head (d - 1)'s rank-th token of `logits` [heads, vocab] with its softmax
// probability (ties broken to the lower id).
void expect_filled_from(const DraftTree& tree, const TreeSpec& spec, const at::Tensor& logits) {
  ASSERT_EQ(tree.size(), spec.size());
  const auto probs = at::softmax(logits.to(at::kDouble), -1);
  for (int32_t i = 0; i < tree.size(); ++i) {
    const auto& path = spec.paths[i];
    ASSERT_EQ(path_of(tree, i), path) << "node " << i;
    const int64_t head = static_cast<int64_t>(path.size()) - 1;
    // The rank-th token: how many tokens beat it must be exactly its rank.
    const int64_t token = tree.node(i).token;
    const double p = probs[head][token].item<double>();
    const auto row = logits[head];
    const int64_t better = row.gt(row[token]).sum().item<int64_t>() +
                           row.eq(row[token]).narrow(0, 0, token).sum().item<int64_t>();
    EXPECT_EQ(better, path.back()) << "node " << i << " token " << token;
    EXPECT_NEAR(tree.node(i).confidence, p, 1e-5) << "node " << i;
  }
}

TEST(Medusa, NodesHoldEachHeadsRankedTokensFromTheLastVerifiedFeature) {
  auto target = tiny_model();
  const std::string dir = saved_heads(*target, "medusa_strategy_heads", 4, false);
  const auto heads = MedusaHeads::load(dir, *target);
  const TreeSpec spec = load_tree_spec(resolve_tree_path("medusa_mc_sim_7b_63"));
  ASSERT_EQ(spec.size(), 63);
  ASSERT_EQ(spec.max_depth(), 4);
  auto s = medusa(*target, {"head=" + dir});

  std::vector<int64_t> prompt{1, 5, 9, 2};
  KvCache cache = target->make_cache(32);
  const auto out = target->forward_chain(cache, prompt);
  s->begin(prompt, out.features, 7);
  prompt.push_back(7);
  expect_filled_from(propose(*s, prompt), spec, heads->logits(out.features[3]));

  // After a verification, the feature of the token before the new root.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  VerifyResult result;
  result.accepted_nodes = {0};
  result.tokens = {11, 12};
  result.features = at::randn({2, 64}, gen);
  observe_one(*s, result);
  prompt.insert(prompt.end(), {11, 12});
  expect_filled_from(propose(*s, prompt), spec, heads->logits(result.features[1]));
}

TEST(Medusa, TreesAreCutToTheHeadsTheRequestAndTheVocabulary) {
  auto target = tiny_model();
  const std::vector<int64_t> seq{1, 2, 3};
  auto begin = [&](DraftStrategy& s) {
    KvCache cache = target->make_cache(16);
    s.begin({1, 2}, target->forward_chain(cache, {1, 2}).features, 3);
  };
  auto two = medusa(*target, {"heads=2"});  // 10 + 28 nodes of Medusa's tree lie within depth 2
  begin(*two);
  EXPECT_EQ(propose(*two, seq).size(), 38);
  EXPECT_EQ(propose(*two, seq, 1000, 1).size(), 10);  // one token wanted: depth 1
  EXPECT_EQ(propose(*two, seq, 5).size(), 5);         // five rows left in the context
  EXPECT_EQ(propose(*two, seq, 0).size(), 0);

  auto cartesian = medusa(*target, {"tree=cartesian", "top_k=3", "heads=3", "lm_head=own"});
  begin(*cartesian);
  const DraftTree t = propose(*cartesian, seq);
  EXPECT_EQ(t.size(), 3 + 9 + 27);
  EXPECT_EQ(t.max_depth(), 3);
  EXPECT_EQ(cartesian_tree(3, 3).size(), 39);

  // An 8-token vocabulary: ranks 8 and 9 of Medusa's tree name no token; their nodes go, with their subtrees.
  auto small = tiny_model(at::kFloat, 2, 7, false, 8);
  auto s = medusa(*small, {});
  KvCache cache = small->make_cache(16);
  s->begin({1, 2}, small->forward_chain(cache, {1, 2}).features, 3);
  const TreeSpec spec = load_tree_spec(resolve_tree_path("medusa_mc_sim_7b_63"));
  int32_t within = 0;
  for (const auto& p : spec.paths) within += std::all_of(p.begin(), p.end(), [](int32_t r) { return r < 8; });
  EXPECT_EQ(propose(*s, seq).size(), within);
  EXPECT_LT(within, 63);
}

TEST(Medusa, OptionsAreChecked) {
  auto target = tiny_model();
  const std::string dir = saved_heads(*target, "medusa_strategy_option_heads", 2, true);
  expect_error([&] { medusa(*target, {"head=" + dir, "heads=3"}); }, {"option heads", "head=" + dir});
  expect_error([&] { medusa(*target, {"top_k=3"}); }, {"option top_k", "tree=medusa_mc_sim_7b_63"});
  expect_error([&] { medusa(*target, {"tree=cartesian", "top_k=64", "heads=4"}); }, {"top_k", "4096"});
  expect_error([&] { medusa(*target, {"tree=no_such_tree"}); }, {"no_such_tree"});
  expect_error([&] { medusa(*target, {"head=" + temp_dir() + "/none"}); }, {"none", "not found"});
  EXPECT_EQ(find_strategy("medusa").head_family, "medusa");
}

TEST(Medusa, DecodesLikeVanillaGreedyAndCountsAcceptedDrafts) {
  auto target = tiny_model();
  GenerationConfig gen;
  gen.max_new_tokens = 30;
  for (const auto& options : std::vector<std::vector<std::string>>{{}, {"tree=cartesian", "top_k=4", "lm_head=own"}}) {
    auto s = medusa(*target, options);
    for (const std::vector<int64_t>& prompt : {std::vector<int64_t>{1, 4, 8}, std::vector<int64_t>{2, 3, 3, 3, 3}}) {
      const auto want = generate_vanilla(*target, prompt, gen);
      SpeculativeDecoder decoder(*target, *s);
      const auto got = decoder.generate(prompt, gen);
      EXPECT_EQ(got.tokens, want.tokens);
      int64_t drafted = 0;
      for (const auto& c : got.cycles) drafted += c.drafted;
      EXPECT_GT(drafted, 0);
    }
  }
}

}  // namespace
