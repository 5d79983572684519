// The committed draft heads of ts-target (EAGLE, EAGLE-3, P-EAGLE, Medusa, Hydra, DFlash), of the mixture-of-experts ts-moe
// (EAGLE) and the parallel draft of both (PARD):
// each loads through its strategy, decodes 33 prompts (README's three and every 16th question of the six bench sets)
// to exactly vanilla's tokens, and drafts as its card says: tau within 3% of card.json's "tau_measured". At T = 0 tau
// does not depend on timing; the band covers the last-bit differences of the kernels of another ISA, which can turn
// a near tie. A head that drafts worse (or better) than committed fails, not just a broken one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/base/file_bytes.h"
#include "core/decoding/speculative_decoder.h"
#include "core/decoding/vanilla_decoder.h"
#include "core/text/tokenizer.h"
#include "decoding/lossless_fixtures.h"
#include "strategies/registry.h"
#include "test_paths.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

struct ZooHead {
  std::string target, folder, strategy;
  std::string option = "head";              // how the strategy is handed the folder
  std::string tau_key = "tau_measured";     // card.json's tau for this target
};
void PrintTo(const ZooHead& h, std::ostream* os) { *os << h.folder; }

class ZooHeads : public ::testing::TestWithParam<ZooHead> {};

TEST_P(ZooHeads, DecodeLikeVanillaAndDraftAsTheirCardSays) {
  DRAFTLAB_REQUIRE_SHARED("data/bench/mt_bench/question.jsonl");
  const std::string target_dir = source_path("data/models/" + GetParam().target);
  const std::string dir = source_path("data/models/" + GetParam().folder);
  const auto card = nlohmann::json::parse(read_text_file(dir + "/card.json"));
  const double measured = card.at(GetParam().tau_key).get<double>();
  const auto target = LlamaModel::load(target_dir, ComputeOptions{});
  const auto tok = load_tokenizer(target_dir);
  auto strategy = make_strategy(GetParam().strategy, StrategyContext{*target}, StrategyOptions::parse({GetParam().option + "=" + dir}));
  GenerationConfig gen;
  gen.max_new_tokens = 48;
  int64_t tokens = 0, cycles = 0;
  std::vector<std::vector<int64_t>> prompts = bench_prompts(*tok, 16, 48);
  for (const char* text : {"once upon a time, there was a little dog named max",
                           "lily and her mom went to the park. lily saw a big tree",
                           "tom had a red ball. he liked to play with it every day"}) {
    prompts.emplace_back();
    for (int32_t id : tok->encode(text, true)) prompts.back().push_back(id);
  }
  ASSERT_EQ(prompts.size(), 33u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto want = generate_vanilla(*target, prompts[i], gen);
    SpeculativeDecoder decoder(*target, *strategy);
    const auto got = decoder.generate(prompts[i], gen);
    ASSERT_EQ(got.tokens, want.tokens) << "prompt " << i;
    tokens += static_cast<int64_t>(got.tokens.size()) - 1;  // the prefill's token is no cycle's
    cycles += static_cast<int64_t>(got.cycles.size());
  }
  const double tau = static_cast<double>(tokens) / static_cast<double>(cycles);
  std::cout << GetParam().folder << ": tau " << tau << " (card " << measured << ")\n";
  EXPECT_NEAR(tau, measured, 0.03 * measured) << "the head drafts unlike its card: retrained, or a bug?";
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooHeads,
                         ::testing::Values(ZooHead{"ts-target", "ts-target-eagle-head", "eagle2"},
                                           ZooHead{"ts-target", "ts-target-eagle3-head", "eagle3"},
                                           ZooHead{"ts-target", "ts-target-medusa", "medusa"},
                                           ZooHead{"ts-target", "ts-target-hydra", "hydra"},
                                           ZooHead{"ts-moe", "ts-moe-eagle-head", "eagle2"},
                                           ZooHead{"ts-target", "ts-target-peagle-head", "peagle"},
                                           ZooHead{"ts-target", "ts-target-dflash-head", "dflash"},
                                           // PARD's one draft for a model family: the same draft for both targets.
                                           ZooHead{"ts-target", "ts-draft-pard", "pard", "draft"},
                                           ZooHead{"ts-moe", "ts-draft-pard", "pard", "draft", "tau_measured_ts_moe"}),
                         [](const auto& info) {
                           std::string n = info.param.folder + (info.param.target == "ts-moe" &&
                                                                        info.param.folder == "ts-draft-pard"
                                                                    ? "_on_ts_moe"
                                                                    : "");
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
