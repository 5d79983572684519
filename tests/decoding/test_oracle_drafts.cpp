// Greedy decoding with drafts that are known to be right: an oracle strategy that hides the target's own greedy
// continuation (from a vanilla run, the independent truth) to a random depth among random distractor siblings and
// subtrees. The verifier must accept exactly the planted path every cycle, over many cycles of cache compaction,
// so acceptance is asserted, not just allowed; a stop token is shown to fall inside accepted drafts, and the end
// of the context inside a tree. Run over the weight storages and KV caches of the native path (and, through ctest,
// over each kernel ISA: DRAFTLAB_ISA).
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "core/decoding/speculative_decoder.h"
#include "core/decoding/vanilla_decoder.h"
#include "core/model/llama_model.h"
#include "lossless_fixtures.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

const char* kTarget = "models/aidreams260K/aidreams260K.bin";
const char* kTokenizer = "models/aidreams260K/tok512.bin";

class OracleTree : public SequenceStrategy {
 public:
  // truth: the prompt followed by the target's greedy continuation.
  OracleTree(std::vector<int64_t> truth, int64_t vocab, uint64_t seed) : truth_(std::move(truth)), vocab_(vocab), rng_(seed) {}
  std::string name() const override { return "oracle_tree"; }
  void begin(const std::vector<int64_t>&, const at::Tensor&, int64_t) override {}

  DraftTree propose(const DraftRequest& request) override {
    const size_t at = request.sequence.size();  // truth_[at] is the root's greedy successor
    EXPECT_TRUE(at <= truth_.size() && std::equal(request.sequence.begin(), request.sequence.end(), truth_.begin()))
        << "the decoder left the greedy path before cycle " << planted.size();
    const int32_t budget = request.max_nodes;
    int32_t depth = static_cast<int32_t>(rng_() % 9);
    depth = std::min<int32_t>({depth, budget, static_cast<int32_t>(truth_.size() - std::min(at, truth_.size()))});
    DraftTree tree;
    std::vector<std::set<int64_t>> children(1);  // tokens under each node, [0] = under the root
    auto add = [&](int64_t token, int32_t parent) {
      const int32_t i = tree.add(token, parent, 0.5f);
      children[parent + 1].insert(token);
      children.emplace_back();
      return i;
    };
    std::vector<int32_t> path;
    int32_t parent = -1;
    for (int32_t d = 0; d < depth; ++d) {
      const int64_t right = truth_[at + d];
      for (int k = static_cast<int>(rng_() % 3); k > 0 && tree.size() + (depth - d) < budget; --k) {
        const int64_t t = static_cast<int64_t>(rng_() % vocab_);
        if (t != right && !children[parent + 1].count(t)) add(t, parent);  // a wrong sibling, tried first
      }
      parent = add(right, parent);
      path.push_back(parent);
    }
    for (int k = static_cast<int>(rng_() % 6); k > 0 && tree.size() < budget; --k) {  // subtrees of wrong guesses
      const int32_t p = static_cast<int32_t>(rng_() % (tree.size() + 1)) - 1;
      const auto on_path = std::find(path.begin(), path.end(), p);
      const size_t next = p < 0 ? 0 : static_cast<size_t>(on_path - path.begin()) + 1;
      const bool p_on_path = p < 0 || on_path != path.end();
      const int64_t t = static_cast<int64_t>(rng_() % vocab_);
      if (p_on_path && at + next < truth_.size() && t == truth_[at + next]) continue;  // would be a second right child
      if (!children[p + 1].count(t)) add(t, p);
    }
    planted.push_back(depth);
    return tree;
  }

  void observe(const VerifyResult& result) override {
    accepted.push_back(static_cast<int32_t>(result.accepted_nodes.size()));
  }

  std::vector<int32_t> planted, accepted;  // per cycle: the right path's depth, what the verifier accepted

 private:
  std::vector<int64_t> truth_;
  int64_t vocab_;
  std::mt19937_64 rng_;
};

struct OracleCase {
  std::string label;
  ComputeOptions compute;
};
void PrintTo(const OracleCase& c, std::ostream* os) { *os << c.label; }

std::vector<OracleCase> oracle_cases() {
  std::vector<OracleCase> cases;
  for (auto [label, storage] : {std::pair<const char*, WeightStorage>{"float32", WeightStorage::Float32},
                                {"float16", WeightStorage::Float16}, {"bfloat16", WeightStorage::BFloat16}}) {
    ComputeOptions o;
    o.cpu_path = CpuPath::Native;
    o.weights = storage;
    cases.push_back({label, o});
  }
  ComputeOptions kv16;
  kv16.cpu_path = CpuPath::Native;
  kv16.kv_cache = at::kHalf;
  cases.push_back({"float32_kv16", kv16});
  return cases;
}

class OracleDrafts : public ::testing::TestWithParam<OracleCase> {
 protected:
  void SetUp() override {
    DRAFTLAB_REQUIRE_SHARED(kTarget);
    DRAFTLAB_REQUIRE_SHARED("data/bench/mt_bench/question.jsonl");
    target = LlamaModel::load(shared_path(kTarget), GetParam().compute);
    ASSERT_NE(target->native(), nullptr);
    if (GetParam().compute.weights) ASSERT_EQ(target->native()->storage(), *GetParam().compute.weights);
    prompts = bench_prompts(*load_tokenizer(shared_path(kTokenizer)), 8, 32);  // 6 sets x 10
    ASSERT_GE(prompts.size(), 50u);
  }

  // Decodes prompt under gen with the oracle; the tokens must be vanilla's and every cycle must accept exactly the
  // planted path. Returns the run and how many tokens the cycles accepted beyond what was emitted (>= 2 when the
  // last cycle stopped at an accepted draft node).
  SpeculativeResult run_oracle(size_t i, const GenerationConfig& gen, const std::vector<int64_t>& continuation) {
    std::vector<int64_t> truth = prompts[i];
    truth.insert(truth.end(), continuation.begin(), continuation.end());
    OracleTree oracle(truth, target->config().vocab_size, 100 + i);
    SpeculativeDecoder decoder(*target, oracle);
    auto got = decoder.generate(prompts[i], gen);
    const auto want = generate_vanilla(*target, prompts[i], gen);
    EXPECT_EQ(got.tokens, want.tokens) << "prompt " << i;
    EXPECT_EQ(got.stop_reason, want.stop_reason) << "prompt " << i;
    EXPECT_EQ(oracle.accepted, oracle.planted) << "prompt " << i << ": the verifier did not accept the right path";
    return got;
  }

  std::unique_ptr<LlamaModel> target;
  std::vector<std::vector<int64_t>> prompts;
};

TEST_P(OracleDrafts, EveryCycleAcceptsThePlantedPath) {
  GenerationConfig gen;
  gen.max_new_tokens = 48;
  int64_t cycles = 0, tokens = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto free_run = generate_vanilla(*target, prompts[i], gen);
    const auto got = run_oracle(i, gen, free_run.tokens);
    cycles += static_cast<int64_t>(got.cycles.size());
    tokens += static_cast<int64_t>(got.tokens.size());
  }
  // Depths 0..8 uniformly (less where the context or the output ends): about 5 tokens a cycle.
  const double tau = static_cast<double>(tokens - static_cast<int64_t>(prompts.size())) / static_cast<double>(cycles);
  std::cout << GetParam().label << ": tau " << tau << " over " << cycles << " cycles\n";
  EXPECT_GT(tau, 4.0);
}

TEST_P(OracleDrafts, AStopTokenInsideAnAcceptedDraftEndsTheOutputThere) {
  int inside = 0, stopped = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationConfig gen;
    gen.max_new_tokens = 40;
    const auto free_run = generate_vanilla(*target, prompts[i], gen);
    if (free_run.tokens.size() < 12) continue;
    gen.stop_tokens = {free_run.tokens[4 + i % 7]};
    const auto got = run_oracle(i, gen, free_run.tokens);
    ASSERT_EQ(got.stop_reason, "stop_token");
    ++stopped;
    if (accepted_beyond_emitted(got) >= 2) ++inside;  // the stop token was an accepted node, not the bonus
  }
  std::cout << GetParam().label << ": the stop token was an accepted draft node in " << inside << " of " << stopped
            << " outputs\n";
  EXPECT_GE(stopped, 30);
  EXPECT_GE(inside, stopped / 3);
}

TEST_P(OracleDrafts, TheContextEndsInsideATree) {
  int inside = 0;
  for (size_t i = 0; i < prompts.size(); i += 3) {
    GenerationConfig free;
    free.max_new_tokens = 40;
    const auto free_run = generate_vanilla(*target, prompts[i], free);
    for (int64_t room : {1, 2, 5, 11}) {
      GenerationConfig gen;
      gen.max_new_tokens = 1000;
      gen.context_limit = static_cast<int64_t>(prompts[i].size()) + room;
      const auto got = run_oracle(i, gen, free_run.tokens);
      ASSERT_EQ(got.stop_reason, "context");
      if (!got.cycles.empty() && got.cycles.back().accepted > 0) ++inside;
    }
  }
  EXPECT_GT(inside, 0) << "no cycle accepted a draft at the end of the context";
}

INSTANTIATE_TEST_SUITE_P(NativePath, OracleDrafts, ::testing::ValuesIn(oracle_cases()),
                         [](const ::testing::TestParamInfo<OracleCase>& info) { return info.param.label; });

}  // namespace
