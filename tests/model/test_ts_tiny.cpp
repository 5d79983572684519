// The committed reference models: ts-tiny loads, generates and its llama2.c export gives the same logits; every
// zoo model's perplexity on a fixed slice of the corpus is within 1% of the value in its card (card.json).
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/base/file_bytes.h"
#include "core/decoding/vanilla_decoder.h"
#include "core/model/perplexity.h"
#include "core/text/tokenizer.h"
#include "core/training/llama2c_export.h"
#include "test_paths.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

const std::string kDir = "data/models/ts-tiny";

TEST(TsTiny, LoadsAndGeneratesStoryText) {
  auto model = LlamaModel::load(source_path(kDir), ComputeOptions{});
  auto tok = load_tokenizer(source_path(kDir));
  std::vector<int64_t> prompt;
  for (int32_t id : tok->encode("once upon a time", true)) prompt.push_back(id);
  GenerationConfig gen;
  gen.max_new_tokens = 40;
  auto out = generate_vanilla(*model, prompt, gen);
  ASSERT_EQ(out.tokens.size(), 40u);
  std::vector<int32_t> ids(out.tokens.begin(), out.tokens.end());
  const std::string text = tok->decode(ids);
  // A model that learned the corpus writes lower-case words separated by spaces.
  EXPECT_GT(std::count(text.begin(), text.end(), ' '), 5) << text;
}

// Every model of the zoo with a card: its perplexity on the card's slice of the corpus within 1% of the card.
class ZooCard : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooCard, PerplexityMatchesItsCard) {
  DRAFTLAB_REQUIRE_SHARED("data/tinystories/tinystories.txt");
  const std::string dir = "data/models/" + GetParam();
  const auto card = nlohmann::json::parse(read_text_file(source_path(dir + "/card.json")));
  const auto& eval = card.at("evaluation");
  auto model = LlamaModel::load(source_path(dir), ComputeOptions{});
  auto tok = load_tokenizer(source_path(dir));
  const std::string text = read_text_file(shared_path("data/tinystories/tinystories.txt"));
  const int64_t offset = eval.at("offset").get<int64_t>(), bytes = eval.at("max_bytes").get<int64_t>();
  const std::string slice = text.substr(offset < 0 ? text.size() + offset : offset, bytes);
  std::vector<int64_t> ids;
  for (int32_t id : tok->encode(slice, true)) ids.push_back(id);
  const double recorded = eval.at("perplexity").get<double>();
  const double got = perplexity(*model, ids, eval.at("context").get<int64_t>()).perplexity;
  EXPECT_NEAR(got, recorded, 0.01 * recorded);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooCard, ::testing::Values("ts-tiny", "ts-target", "ts-draft", "ts-moe"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(TsTiny, Llama2cExportGivesTheSameLogits) {
  auto hf = LlamaModel::load(source_path(kDir), ComputeOptions{});
  const std::string bin = temp_dir() + "/ts-tiny.bin";
  export_llama2c(*hf, bin);
  auto exported = LlamaModel::load(bin, ComputeOptions{});
  const std::vector<int64_t> seq{0, 57, 300, 12, 999, 4, 77, 512};
  KvCache a = hf->make_cache(8), b = exported->make_cache(8);
  auto la = hf->forward_chain(a, seq).logits, lb = exported->forward_chain(b, seq).logits;
  EXPECT_LT((la - lb).abs().max().item<double>(), 1e-4);
}

}  // namespace
