// The forward against llama2.c's run.c: logits of the first 64 positions within 1e-4 and greedy ids identical
// to the end, for every case in ../shared/golden/llama2c (both models).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/decoding/vanilla_decoder.h"
#include "core/model/llama_model.h"
#include "test_paths.h"

using namespace draftlab;
using draftlab::testing::shared_path;

namespace {

struct GoldenCase {
  std::string name;   // file prefix in golden/llama2c
  std::string model;  // path under ../shared
  int64_t steps;      // run.c -n: positions forwarded
};

struct GoldenIds {
  std::vector<int64_t> prompt, generated;
};

std::vector<int64_t> read_labeled_ids(std::istream& in, const std::string& label) {
  std::string line;
  std::getline(in, line);
  std::istringstream ss(line);
  std::string head;
  ss >> head;
  EXPECT_EQ(head, label);
  std::vector<int64_t> ids;
  int64_t id;
  while (ss >> id) ids.push_back(id);
  return ids;
}

GoldenIds read_ids(const std::string& path) {
  std::ifstream in(path);
  GoldenIds g;
  g.prompt = read_labeled_ids(in, "prompt");
  g.generated = read_labeled_ids(in, "generated");
  return g;
}

std::ostream& operator<<(std::ostream& os, const GoldenCase& c) { return os << c.name; }

class GoldenLlama2c : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenLlama2c, LogitsMatchRunC) {
  const GoldenCase& gc = GetParam();
  DRAFTLAB_REQUIRE_SHARED("golden/llama2c/" + gc.name + ".logits.f32");
  DRAFTLAB_REQUIRE_SHARED(gc.model);
  auto model = LlamaModel::load(shared_path(gc.model), ComputeOptions{});
  const int64_t V = model->config().vocab_size;
  GoldenIds ids = read_ids(shared_path("golden/llama2c/" + gc.name + ".ids.txt"));
  std::vector<int64_t> seq = ids.prompt;
  seq.insert(seq.end(), ids.generated.begin(), ids.generated.end());

  std::ifstream f(shared_path("golden/llama2c/" + gc.name + ".logits.f32"), std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const int64_t rows = static_cast<int64_t>(raw.size()) / (V * 4);
  ASSERT_EQ(rows, 64);
  auto golden = at::from_blob(raw.data(), {rows, V}, at::kFloat).clone();

  // run.c feeds one token at a time; do the same, then check a single full-sequence forward agrees too.
  KvCache cache = model->make_cache(rows);
  for (int64_t p = 0; p < rows; ++p) {
    auto out = model->forward_chain(cache, {seq[p]});
    ASSERT_LT((out.logits[0] - golden[p]).abs().max().item<double>(), 1e-4) << "position " << p;
  }
  KvCache full_cache = model->make_cache(rows);
  auto full = model->forward_chain(full_cache, std::vector<int64_t>(seq.begin(), seq.begin() + rows));
  EXPECT_LT((full.logits - golden).abs().max().item<double>(), 1e-4);
}

TEST_P(GoldenLlama2c, GreedyIdsMatchRunC) {
  const GoldenCase& gc = GetParam();
  DRAFTLAB_REQUIRE_SHARED("golden/llama2c/" + gc.name + ".ids.txt");
  DRAFTLAB_REQUIRE_SHARED(gc.model);
  auto model = LlamaModel::load(shared_path(gc.model), ComputeOptions{});
  GoldenIds ids = read_ids(shared_path("golden/llama2c/" + gc.name + ".ids.txt"));

  GenerationConfig gen;
  gen.max_new_tokens = 100000;      // bounded by the context below, as run.c is by -n steps
  gen.context_limit = gc.steps;
  for (int32_t id : model->config().eos_token_ids) gen.stop_tokens.push_back(id);  // run.c: BOS (1) ends it
  auto result = generate_vanilla(*model, ids.prompt, gen);
  EXPECT_EQ(result.tokens, ids.generated);
}

INSTANTIATE_TEST_SUITE_P(
    AllCases, GoldenLlama2c,
    ::testing::Values(GoldenCase{"aidreams260K.once-upon-a-time", "models/aidreams260K/aidreams260K.bin", 128},
                      GoldenCase{"aidreams260K.bos", "models/aidreams260K/aidreams260K.bin", 128},
                      GoldenCase{"aidreams260K.neural-network", "models/aidreams260K/aidreams260K.bin", 128},
                      GoldenCase{"stories260K.bos-300", "models/stories260K/stories260K.bin", 300}),
    [](const ::testing::TestParamInfo<GoldenCase>& info) {
      std::string n = info.param.name;
      for (char& ch : n)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

}  // namespace
