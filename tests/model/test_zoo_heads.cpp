// The committed draft heads of ts-target (EAGLE, EAGLE-3, Medusa, Hydra) and of the mixture-of-experts ts-moe (EAGLE): each loads through its strategy, decodes README's
// prompts to exactly vanilla's tokens, and drafts well enough to be worth committing: tau at least the floor in
// its card (card.json "tau_floor", a bound well under what the card reports, so that only a broken or mismatched
// head fails, not timing or thread noise; tau does not depend on timing at all at T = 0).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/base/file_bytes.h"
#include "core/decoding/speculative_decoder.h"
#include "core/decoding/vanilla_decoder.h"
#include "core/text/tokenizer.h"
#include "strategies/registry.h"
#include "test_paths.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

struct ZooHead {
  std::string target, folder, strategy;
};
void PrintTo(const ZooHead& h, std::ostream* os) { *os << h.folder; }

class ZooHeads : public ::testing::TestWithParam<ZooHead> {};

TEST_P(ZooHeads, DecodeLikeVanillaAndDraftAsTheirCardSays) {
  const std::string target_dir = source_path("data/models/" + GetParam().target);
  const std::string dir = source_path("data/models/" + GetParam().folder);
  const auto card = nlohmann::json::parse(read_text_file(dir + "/card.json"));
  const double floor = card.at("tau_floor").get<double>();
  const auto target = LlamaModel::load(target_dir, ComputeOptions{});
  const auto tok = load_tokenizer(target_dir);
  auto strategy = make_strategy(GetParam().strategy, StrategyContext{*target}, StrategyOptions::parse({"head=" + dir}));
  GenerationConfig gen;
  gen.max_new_tokens = 48;
  int64_t tokens = 0, cycles = 0;
  for (const char* text : {"once upon a time, there was a little dog named max",
                           "lily and her mom went to the park. lily saw a big tree",
                           "tom had a red ball. he liked to play with it every day"}) {
    std::vector<int64_t> prompt;
    for (int32_t id : tok->encode(text, true)) prompt.push_back(id);
    const auto want = generate_vanilla(*target, prompt, gen);
    SpeculativeDecoder decoder(*target, *strategy);
    const auto got = decoder.generate(prompt, gen);
    ASSERT_EQ(got.tokens, want.tokens) << text;
    tokens += static_cast<int64_t>(got.tokens.size());
    cycles += static_cast<int64_t>(got.cycles.size());
  }
  const double tau = static_cast<double>(tokens) / static_cast<double>(cycles);
  std::cout << GetParam().folder << ": tau " << tau << " (card floor " << floor << ")\n";
  EXPECT_GE(tau, floor);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooHeads,
                         ::testing::Values(ZooHead{"ts-target", "ts-target-eagle-head", "eagle2"},
                                           ZooHead{"ts-target", "ts-target-eagle3-head", "eagle3"},
                                           ZooHead{"ts-target", "ts-target-medusa", "medusa"},
                                           ZooHead{"ts-target", "ts-target-hydra", "hydra"},
                                           ZooHead{"ts-moe", "ts-moe-eagle-head", "eagle2"}),
                         [](const auto& info) {
                           std::string n = info.param.folder;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
