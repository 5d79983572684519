// Every `draftlab exp` driver on ts-tiny with its trained head (2 questions, 8 new tokens, 1 repeat, no warm-up):
// the results file holds every dataset of the schema with consistent tables, greedy output equal to vanilla's,
// node tables that agree with the cycles (accepted nodes = accept length - 1, along one root path); sweep shards
// merged cover the grid once; Spec-Bench lines agree with the rows; bad configurations give clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/base/file_bytes.h"
#include "analysis/experiment_catalog.h"
#include "analysis/run_metrics.h"
#include "core/base/sha256.h"
#include "core/model/llama_model.h"
#include "strategies/eagle3/eagle3_head.h"
#include "strategies/medusa/medusa_heads.h"
#include "core/text/tokenizer.h"
#include "experiments/drivers/drivers.h"
#include "experiments/results/spec_bench_jsonl.h"
#include "strategies/eagle_tree/eagle2.h"
#include "strategies/registry.h"
#include "test_errors.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using testing::expect_error;
using testing::source_path;
namespace fs = std::filesystem;

struct TinyModels {
  std::unique_ptr<LlamaModel> target;
  std::unique_ptr<Tokenizer> tokenizer;
};

const TinyModels& tiny() {
  static TinyModels m = [] {
    TinyModels t;
    t.target = LlamaModel::load(source_path("data/models/ts-tiny"), ComputeOptions{});
    t.tokenizer = load_tokenizer(source_path("data/models/ts-tiny/tokenizer.json"));
    return t;
  }();
  return m;
}

std::string head_dir() { return source_path("data/models/ts-tiny-eagle-head"); }

ExperimentConfig tiny_config(const std::string& experiment) {
  ::setenv("DRAFTLAB_SHARED", testing::shared_dir().c_str(), 0);  // where the drivers find the bench sets
  ExperimentConfig c;
  c.experiment = experiment;
  c.target_path = source_path("data/models/ts-tiny");
  c.heads = {{"", head_dir()}};
  c.questions = 2;
  c.runner.max_new_tokens = 8;
  c.runner.repeats = 1;
  c.runner.warmup = 0;
  c.command_line = "test";
  return c;
}

// Runs, writes, reads back (the reader validates every table and offset) and checks what the drivers promise.
ResultsFile run_and_check(const ExperimentConfig& c) {
  const TinyModels& m = tiny();
  const ResultsFile written = run_experiment(*m.target, *m.tokenizer, plan_experiment(c));
  const std::string path = testing::temp_dir() + "/" + c.experiment + "-" + std::to_string(c.shard_index) + ".h5";
  write_results(path, written);
  const ResultsFile r = read_results(path);
  EXPECT_EQ(r.attributes.at("experiment"), c.experiment);
  for (const char* key : {"git_commit", "command_line", "date", "host", "cpu", "blas", "device", "dtype", "models",
                          "shard", "settings"})
    EXPECT_TRUE(r.attributes.count(key) && !r.attributes.at(key).empty()) << key;
  const auto models = nlohmann::json::parse(r.attributes.at("models"));
  EXPECT_EQ(models["target"]["sha256"], sha256_file(source_path("data/models/ts-tiny/model.safetensors")));
  EXPECT_NO_THROW(nlohmann::json::parse(r.attributes.at("settings")));

  std::map<std::string, int64_t> drafted, accepted;  // per method, over the whole file
  std::map<std::string, std::string> strategy_of;     // method label -> strategy name
  for (const RunRecord& run : r.runs) {
    strategy_of[run.method] = run.strategy;
    SCOPED_TRACE(run.method + " on " + run.dataset + " T=" + std::to_string(run.temperature));
    const QuestionRows& q = run.questions;
    EXPECT_GT(q.size(), 0u);
    for (size_t i = 0; i < q.size(); ++i) {
      EXPECT_GE(q.new_tokens[i], 0);  // 0: the first token was EOS (a story model on a chat question)
      if (q.new_tokens[i] == 0) EXPECT_EQ(q.cycles[i], 0);
      EXPECT_LE(q.new_tokens[i], 8);
      EXPECT_GT(q.wall_seconds[i], 0.0);
      const int8_t want = run.temperature == 0.0 && run.strategy != "vanilla" ? 1 : -1;
      EXPECT_EQ(q.identical[i], want) << "question row " << i;
      // Tokens emitted = accept lengths of the cycles + the prefill's token (less any cut by max_new_tokens / EOS).
      int32_t emitted = 1;
      for (int64_t j = q.cycle_offset[i]; j < q.cycle_offset[i] + q.cycles[i]; ++j) emitted += run.cycles.accept_length[j];
      EXPECT_GE(emitted, q.new_tokens[i]);
      EXPECT_LE(emitted - q.new_tokens[i], run.strategy == "vanilla" ? 1 : 8);
    }
    // Nodes: the accepted ones of a cycle are accept_length - 1 nodes forming one path from the root.
    const CycleRows& cy = run.cycles;
    const NodeRows& n = run.nodes;
    for (size_t j = 0; j < cy.size(); ++j) {
      if (run.strategy == "vanilla") EXPECT_EQ(cy.drafted[j], 0);
      std::map<int32_t, int64_t> row_of_index;
      int accepted = 0;
      int32_t last_accepted = 0;  // tree_index of the deepest accepted node so far (0 = root)
      for (int64_t k = cy.node_offset[j]; k < cy.node_offset[j] + cy.drafted[j]; ++k) {
        row_of_index[n.tree_index[k]] = k;
        EXPECT_EQ(n.tree_index[k], k - cy.node_offset[j] + 1);
        const int32_t parent_depth = n.parent[k] == 0 ? 0 : n.depth[row_of_index.at(n.parent[k])];
        EXPECT_EQ(n.depth[k], parent_depth + 1);
        if (n.accepted[k]) {
          ++accepted;
          EXPECT_EQ(n.parent[k], last_accepted) << "accepted node " << k << " is not on the accepted path";
          last_accepted = n.tree_index[k];
        }
        if (!find_strategy(run.strategy).has_confidence) {  // model-free drafts (pld, lookahead)
          EXPECT_TRUE(std::isnan(n.confidence[k]));
        } else {
          EXPECT_GE(n.confidence[k], 0.0f);
          EXPECT_LE(n.confidence[k], 1.0f + 1e-5f);
          EXPECT_LE(n.value[k], n.confidence[k] + 1e-5f);  // a product of confidences along the path
        }
      }
      EXPECT_EQ(accepted + 1, cy.accept_length[j]) << "cycle " << j;
    }
    drafted[run.method] += static_cast<int64_t>(n.size());
    for (int8_t a : n.accepted) accepted[run.method] += a;
    double tau = 0;
    for (int32_t a : cy.accept_length) tau += a;
    EXPECT_NEAR(run.tau, cy.size() ? tau / cy.size() : 0.0, 1e-12);
  }
  // The checks above must have had something to check: every drafting method drafted, the model-based ones got
  // drafts accepted (a story model answers some chat questions with EOS at once, so not necessarily in every run).
  for (const auto& [method, count] : drafted) {
    if (method == "vanilla") continue;
    EXPECT_GT(count, 0) << method;
    if (find_strategy(strategy_of[method]).needs != StrategyNeeds::Nothing) EXPECT_GT(accepted[method], 0) << method;
  }
  return r;
}

std::set<std::string> methods_of(const ResultsFile& r) {
  std::set<std::string> s;
  for (const auto& run : r.runs) s.insert(run.method);
  return s;
}

// The drivers are the catalog's drivers, no more, no fewer: the catalog names what each reproduces (paper tables,
// plots, notebooks, reproduce.sh read it), the driver table only adds the methods.
TEST(Drivers, TheDriverTableIsTheCatalogsDrivers) {
  std::set<std::string> table, catalog;
  for (const ExperimentDescriptor& e : experiment_table()) EXPECT_TRUE(table.insert(e.name).second) << e.name;
  for (const std::string& name : analysis::driver_names()) catalog.insert(name);
  EXPECT_EQ(table, catalog);
  EXPECT_EQ(experiment_names(), analysis::driver_names());
  const std::string help = experiments_help();
  EXPECT_NE(help.find("speed          EAGLE-2 Table 1: every strategy"), std::string::npos) << help;
  expect_error([] { find_experiment("quantized"); }, {"exp", "speed", "quantized"});  // a benchmark, not a driver
}

TEST(Drivers, SpeedCoversSixDatasetsTwoTemperaturesAndTheMethods) {
  DRAFTLAB_REQUIRE_SHARED("data/bench/mt_bench/question.jsonl");
  const ResultsFile r = run_and_check(tiny_config("speed"));
  // Every registered strategy the config can feed (here: no draft model; the EAGLE head), each strategy with a
  // paper setting twice: its CPU-sized default and that setting (StrategyDescriptor::paper_setting), so a new
  // family joins without a test edit. The families known today must be among them.
  std::set<std::string> expected;
  for (const StrategyDescriptor* s : strategy_table()) {
    const bool fed = s->needs == StrategyNeeds::Nothing ||
                     (s->needs == StrategyNeeds::Head && s->head_family == eagle2_strategy().head_family);
    if (!fed) continue;
    expected.insert(s->name);
    if (!s->paper_setting.empty() && s->shape != DraftShape::None) expected.insert(s->name + " (" + s->paper_setting_label + ")");
  }
  EXPECT_EQ(methods_of(r), expected);
  for (const char* known : {"vanilla", "pld", "lookahead", "lookahead (W15 N5 G15)", "static-tree", "eagle-chain", "eagle2"})
    EXPECT_TRUE(expected.count(known)) << known;
  std::set<std::pair<std::string, double>> cells;
  for (const auto& run : r.runs) cells.insert({run.dataset, run.temperature});
  EXPECT_EQ(cells.size(), 12u);
  EXPECT_EQ(r.runs.size(), 12u * expected.size());  // 12 cells x the methods
  // MT-bench: two questions, two turns each; the second turn's prompt holds the first turn and its answer.
  for (const auto& run : r.runs) {
    if (run.dataset != "mt_bench") continue;
    ASSERT_EQ(run.questions.size(), 4u);
    EXPECT_EQ(run.questions.turn, (std::vector<int32_t>{0, 1, 0, 1}));
    EXPECT_EQ(run.questions.question_id[0], run.questions.question_id[1]);
    EXPECT_GT(run.questions.prompt_tokens[1], run.questions.prompt_tokens[0]);
  }
  // Spec-Bench files: one line per question, agreeing with the HDF5 rows.
  const std::string dir = testing::temp_dir() + "/speed-jsonl";
  write_spec_bench_jsonl(r, dir, 1.0);
  for (const auto& run : r.runs) {
    std::ifstream in(dir + "/" + spec_bench_file_name(r, run));
    ASSERT_TRUE(in) << spec_bench_file_name(r, run);
    std::string line;
    size_t row = 0;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      const auto& c = j["choices"][0];
      EXPECT_EQ(j["model_id"], run.method);
      size_t accept_count = 0;  // accept_lengths: one flat list over the turns, a value per cycle
      for (size_t t = 0; t < c["turns"].size(); ++t, ++row) {
        ASSERT_LT(row, run.questions.size());
        EXPECT_EQ(j["question_id"], run.questions.question_id[row]);
        EXPECT_EQ(c["new_tokens"][t], run.questions.new_tokens[row]);
        EXPECT_EQ(c["decoding_steps"][t], run.questions.cycles[row]);
        accept_count += static_cast<size_t>(run.questions.cycles[row]);
        EXPECT_EQ(c["wall_time"][t], run.questions.wall_seconds[row]);
      }
      EXPECT_EQ(c["accept_lengths"].size(), accept_count);
      for (const auto& a : c["accept_lengths"]) EXPECT_TRUE(a.is_number_integer()) << a;
    }
    EXPECT_EQ(row, run.questions.size());
  }
}

TEST(Drivers, EverySingleHeadDriverRunsItsPreset) {
  DRAFTLAB_REQUIRE_SHARED("data/bench/mt_bench/question.jsonl");
  const std::map<std::string, std::set<std::string>> want = {
      {"alpha", {"vanilla", "eagle-chain"}},
      {"calibration", {"vanilla", "eagle2"}},
      {"positions", {"vanilla", "static-tree"}},
      {"ablate-eagle2", {"vanilla", "eagle2", "eagle2 w/o value", "eagle2 w/o reranking", "eagle2 w/o both"}},
      {"tree-vs-chain", {"vanilla", "static-tree", "eagle-chain"}},
  };
  for (const auto& [name, methods] : want) {
    SCOPED_TRACE(name);
    const ResultsFile r = run_and_check(tiny_config(name));
    EXPECT_EQ(methods_of(r), methods);
    // EAGLE-2 Table 3 is on MT-bench and GSM8K, the others on MT-bench.
    const std::set<std::string> sets = name == "ablate-eagle2" ? std::set<std::string>{"mt_bench", "gsm8k"}
                                                                : std::set<std::string>{"mt_bench"};
    std::set<std::string> seen;
    for (const auto& run : r.runs) {
      seen.insert(run.dataset);
      EXPECT_EQ(run.temperature, 0.0);
    }
    EXPECT_EQ(seen, sets);
    ASSERT_TRUE(r.training.count("head"));  // the head's training curves come along
    EXPECT_FALSE(r.training.at("head").train_loss.empty());
  }
  // alpha's chain drafts are chains of depth 5: node i of a cycle has depth i and its predecessor as parent.
  const ResultsFile alpha = run_and_check(tiny_config("alpha"));
  for (const auto& run : alpha.runs)
    for (size_t k = 0; k < run.nodes.size(); ++k) {
      EXPECT_EQ(run.nodes.depth[k], run.nodes.tree_index[k]);
      EXPECT_EQ(run.nodes.parent[k], run.nodes.tree_index[k] - 1);
      EXPECT_LE(run.nodes.depth[k], 5);
    }
}

TEST(Drivers, BatchRunsEverySizeBesideItsOwnBaselineWithTheSameAnswers) {
  DRAFTLAB_REQUIRE_SHARED("data/bench/mt_bench/question.jsonl");
  ExperimentConfig c = tiny_config("batch");
  c.questions = 3;  // batches of 2: one full, one ragged; MT-bench questions have two turns
  c.batch_sizes = {1, 2};
  c.runner.ignore_eos = true;
  const ResultsFile r = run_and_check(c);
  EXPECT_EQ(methods_of(r), (std::set<std::string>{"vanilla", "static-tree", "eagle2 (tt=4 d=4 k=1)", "eagle2 (auto)", "eagle-chain"}));
  ASSERT_EQ(r.runs.size(), 10u);
  std::map<std::pair<std::string, int64_t>, const RunRecord*> by;
  for (const RunRecord& run : r.runs) {
    by[{run.method, run.batch_size}] = &run;
    // Speedups divide by batched vanilla of the same size.
    const RunRecord* base = analysis::find_baseline(r, run);
    ASSERT_NE(base, nullptr);
    EXPECT_EQ(base->batch_size, run.batch_size);
    EXPECT_EQ(run.questions.size(), 6u);
  }
  // Greedy answers do not depend on how the questions were batched (each turn's history included).
  for (const auto& [key, run] : by) {
    if (key.second != 2) continue;
    const RunRecord* alone = by.at({key.first, 1});
    EXPECT_EQ(run->questions.question_id, alone->questions.question_id) << key.first;
    EXPECT_EQ(run->questions.turn, alone->questions.turn) << key.first;
    EXPECT_EQ(run->questions.answer, alone->questions.answer) << key.first;
  }
  const std::string summary = summary_table(r);
  EXPECT_NE(summary.find(" B "), std::string::npos) << summary;
}

TEST(Drivers, LabelledHeadDriversRunOneMethodPerHead) {
  DRAFTLAB_REQUIRE_SHARED("data/bench/mt_bench/question.jsonl");
  ExperimentConfig c = tiny_config("train-data");
  c.heads = {{"fixed", head_dir()}, {"generated", head_dir()}};
  c.head_strategy = "eagle-chain";
  ResultsFile r = run_and_check(c);
  EXPECT_EQ(methods_of(r), (std::set<std::string>{"vanilla", "fixed", "generated"}));
  EXPECT_TRUE(r.training.count("fixed") && r.training.count("generated"));

  c.experiment = "ablate-inputs";
  c.heads = {{"feature", head_dir()}, {"feature & shifted token", head_dir()}};
  c.head_strategy = "eagle2";
  r = run_and_check(c);
  EXPECT_EQ(methods_of(r), (std::set<std::string>{"vanilla", "feature", "feature & shifted token"}));
}

// The EAGLE-3 drivers: each labelled head drives the EAGLE-2 tree strategy of its own family (eagle2 / eagle3), at
// the papers' tree and (ablate-eagle3) the CPU-sized one; eagle3-alpha runs 8-token chains of both heads.
TEST(Drivers, EagleThreeDriversPickEachHeadsStrategy) {
  const std::string eagle3 = testing::temp_dir() + "/drivers-eagle3-head";
  fs::create_directories(eagle3);
  Eagle3Head::random(*tiny().target, 5)->save(eagle3);
  auto strategies = [](const std::vector<MethodSpec>& methods) {
    std::map<std::string, std::string> by_label;
    for (const MethodSpec& m : methods) by_label[m.label] = m.strategy;
    return by_label;
  };
  ExperimentConfig c = tiny_config("ablate-eagle3");
  c.heads = {{"EAGLE-2 head", head_dir()}, {"TTT + fusion", eagle3}};
  EXPECT_EQ(strategies(experiment_methods(c)),
            (std::map<std::string, std::string>{{"vanilla", "vanilla"},
                                                {"EAGLE-2 head", "eagle2"},
                                                {"TTT + fusion", "eagle3"},
                                                {"EAGLE-2 head (tt=4 d=4 k=1)", "eagle2"},
                                                {"TTT + fusion (tt=4 d=4 k=1)", "eagle3"}}));
  c.experiment = "data-scaling";
  EXPECT_EQ(strategies(experiment_methods(c)),
            (std::map<std::string, std::string>{
                {"vanilla", "vanilla"}, {"EAGLE-2 head", "eagle2"}, {"TTT + fusion", "eagle3"}}));
  c.heads = {{"", head_dir()}};
  expect_error([&] { experiment_methods(c); }, {"exp data-scaling", "LABEL=DIR"});
  const std::string medusa = testing::temp_dir() + "/drivers-scaling-medusa";
  fs::create_directories(medusa);
  MedusaHeads::random(*tiny().target, 2)->save(medusa);
  c.heads = {{"medusa", medusa}};
  expect_error([&] { experiment_methods(c); }, {"--head medusa=", "expected an EAGLE or EAGLE-3 head", "Medusa"});

  c = tiny_config("eagle3-alpha");
  c.heads = {{"", head_dir()}, {"", eagle3}};
  const std::vector<MethodSpec> chains = experiment_methods(c);
  ASSERT_EQ(chains.size(), 3u);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(chains[i].strategy, i == 1 ? "eagle2" : "eagle3");
    EXPECT_EQ(chains[i].option("top_k"), "1");
    EXPECT_EQ(chains[i].option("depth"), "8");
    EXPECT_EQ(chains[i].option("total_tokens"), "9");  // the root and 8 draft tokens: n-alpha for n = 0..7
    EXPECT_EQ(chains[i].option("head"), i == 1 ? head_dir() : eagle3);
  }

  // A whole run: the trained tiny EAGLE head under two labels (data-scaling's loop; the random EAGLE-3 head
  // drafts nothing acceptable). Its training log comes along under each label with the tokens it saw.
  DRAFTLAB_REQUIRE_SHARED("data/bench/mt_bench/question.jsonl");
  c = tiny_config("data-scaling");
  c.heads = {{"small", head_dir()}, {"large", head_dir()}};
  const ResultsFile r = run_and_check(c);
  EXPECT_EQ(methods_of(r), (std::set<std::string>{"vanilla", "small", "large"}));
  ASSERT_TRUE(r.training.count("small") && r.training.count("large"));
  EXPECT_EQ(r.training.at("small").attributes.at("family"), "eagle");  // the table's Family column
}

TEST(Drivers, SweepShardsMergedCoverTheGridExactlyOnce) {
  DRAFTLAB_REQUIRE_SHARED("data/bench/mt_bench/question.jsonl");
  ExperimentConfig c = tiny_config("sweep");
  // Story openings: ts-tiny continues them (on chat questions it often stops at once).
  const std::string stories = testing::temp_dir() + "/stories.jsonl";
  write_file_atomically(stories, R"({"question_id": 1, "turns": ["Once upon a time, there was a little girl named Lily."]})"
                                 "\n"
                                 R"({"question_id": 2, "turns": ["Tom had a red ball. One day, he went to the park"]})"
                                 "\n");
  c.datasets = {stories};
  c.grid = {{"total_tokens", {"6", "10"}}, {"depth", {"2", "3"}}, {"top_k", {"2"}}};
  std::vector<std::string> paths;
  for (int shard = 0; shard < 2; ++shard) {
    c.shard_index = shard;
    c.shard_count = 2;
    run_and_check(c);
    paths.push_back(testing::temp_dir() + "/sweep-" + std::to_string(shard) + ".h5");
  }
  const ResultsFile merged = merge_results(paths);
  EXPECT_EQ(merged.attributes.at("shard"), "merged:2");
  std::multiset<int> indices;
  std::set<std::tuple<int, int, int>> points;
  int vanilla = 0;
  for (const auto& run : merged.runs) {
    if (run.strategy == "vanilla") {
      ++vanilla;
      EXPECT_TRUE(run.grid_json.empty());
      continue;
    }
    const auto g = nlohmann::json::parse(run.grid_json);
    indices.insert(g["index"].get<int>());
    points.insert({g["total_tokens"].get<int>(), g["depth"].get<int>(), g["top_k"].get<int>()});
    const auto options = nlohmann::json::parse(run.options_json);
    EXPECT_EQ(options["total_tokens"], std::to_string(g["total_tokens"].get<int>()));
    EXPECT_EQ(run.shard, std::to_string(g["index"].get<int>() % 2) + "/2");
  }
  EXPECT_EQ(indices, (std::multiset<int>{0, 1, 2, 3}));
  EXPECT_EQ(points, (std::set<std::tuple<int, int, int>>{{6, 2, 2}, {6, 3, 2}, {10, 2, 2}, {10, 3, 2}}));
  EXPECT_EQ(vanilla, 2);  // one baseline per shard (process)
  for (const auto& run : merged.runs) EXPECT_EQ(run.dataset, "stories");
  EXPECT_NE(summary_table(merged).find("x*"), std::string::npos);  // the fastest grid point
}

// A grid axis is any eagle2 option; its values are checked against the option table when parsed (before a model
// loads), and reach the strategy and the results file's `grid` in one form.
TEST(Drivers, GridAxesAreEagle2OptionsCheckedWhenParsed) {
  expect_error([] { parse_grid_axis("--depth", "depth", "4,0"); }, {"--depth", "depth", "0"});
  expect_error([] { parse_grid_axis("--grid", "totl_tokens", "4"); }, {"--grid", "totl_tokens"});
  expect_error([] { parse_grid_axis("--grid", "rank_by", "value,size"); }, {"--grid", "rank_by", "size"});
  expect_error([] { parse_grid_axis("--top-k", "top_k", ","); }, {"--top-k", "values"});
  ExperimentConfig c = tiny_config("sweep");
  set_grid_axis(c.grid, parse_grid_axis("--total-tokens", "total_tokens", "auto,10"));
  set_grid_axis(c.grid, parse_grid_axis("--grid", "rank_by", "value,confidence"));
  c.grid.erase(c.grid.begin() + 1);  // depth: its default
  ASSERT_EQ(c.grid.size(), 3u);      // total_tokens, top_k, rank_by
  const std::vector<MethodSpec> m = experiment_methods(c);
  ASSERT_EQ(m.size(), 1u + 2 * 2 * 2);
  EXPECT_EQ(m[1].label, "eagle2 tt=auto k=4 rank_by=value");
  EXPECT_EQ(m[8].label, "eagle2 tt=10 k=8 rank_by=confidence");
  EXPECT_EQ(m[8].option("rank_by"), "confidence");
  const auto g = nlohmann::json::parse(m[1].grid_json);
  EXPECT_EQ(g["total_tokens"], "auto");  // a number where the value is one, else the text
  EXPECT_EQ(nlohmann::json::parse(m[8].grid_json)["total_tokens"], 10);
}

TEST(Drivers, OverlongPromptsAreCutFromTheLeftToLeaveRoomForTheAnswer) {
  const std::string path = testing::temp_dir() + "/long.jsonl";
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the little dog ran to the park and saw a big red ball. ";
  write_file_atomically(path, nlohmann::json{{"question_id", 7}, {"turns", {text}}}.dump() + "\n");
  ExperimentConfig c = tiny_config("calibration");
  c.datasets = {path};
  const ResultsFile r = run_and_check(c);
  for (const auto& run : r.runs) {
    EXPECT_EQ(run.dataset, "long");
    EXPECT_EQ(run.questions.prompt_tokens[0], 256 - 8);  // context 256 minus --max-new-tokens
    EXPECT_EQ(run.questions.question_id[0], 7);
  }
}

TEST(Drivers, BadConfigurationsAreClearErrors) {
  ExperimentConfig c = tiny_config("alpha");
  c.heads.clear();
  expect_error([&] { experiment_methods(c); }, {"exp alpha", "--head"});
  c.experiment = "speedy";
  expect_error([&] { apply_driver_defaults(c); }, {"speedy", "speed, eagle3, eagle3-alpha"});
  c = tiny_config("train-data");
  c.heads = {{"fixed", head_dir()}};
  expect_error([&] { experiment_methods(c); }, {"generated=DIR"});
  c = tiny_config("ablate-inputs");
  expect_error([&] { experiment_methods(c); }, {"LABEL=DIR"});
  c = tiny_config("calibration");
  c.strategy_specs = {"eagle2:total_tokens"};
  expect_error([&] { experiment_methods(c); }, {"key=value", "total_tokens"});
  // A misspelled option or a value out of range fails with the methods, before any model loads.
  c.strategy_specs = {"eagle2:totl_tokens=4"};
  expect_error([&] { experiment_methods(c); }, {"eagle2", "totl_tokens"});
  c.strategy_specs = {"eagle3:depth=0"};
  expect_error([&] { experiment_methods(c); }, {"eagle3", "depth", "1..100000"});
  int i = 0, n = 0;
  expect_error([&] { parse_shard("2/2", i, n); }, {"--shard", "2/2"});
  expect_error([&] { parse_shard("x", i, n); }, {"--shard", "i/n"});
  parse_shard("1/3", i, n);
  EXPECT_EQ(i, 1);
  EXPECT_EQ(n, 3);
  EXPECT_EQ(parse_head_spec("a=b/c").label, "a");
  EXPECT_EQ(parse_head_spec("b/c").path, "b/c");

  c = tiny_config("calibration");
  c.datasets = {testing::temp_dir() + "/none.jsonl"};
  expect_error([&] { run_experiment(*tiny().target, *tiny().tokenizer, plan_experiment(c)); }, {"none.jsonl", "cannot open"});
  c = tiny_config("calibration");
  c.runner.max_new_tokens = 256;  // the whole context: no room for a prompt
  expect_error([&] { run_experiment(*tiny().target, *tiny().tokenizer, plan_experiment(c)); }, {"--max-new-tokens", "256"});
}

TEST(Drivers, StrategyOptionOverridesAPresetMethodOrAddsOne) {
  ExperimentConfig c = tiny_config("calibration");
  c.strategy_specs = {"eagle2:total_tokens=12,depth=3", "pld:num_tokens=4"};
  const auto m = experiment_methods(c);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1].label, "eagle2");
  EXPECT_EQ(m[1].option("total_tokens"), "12");
  EXPECT_EQ(m[1].option("depth"), "3");
  EXPECT_EQ(m[1].option("head"), head_dir());
  EXPECT_EQ(m[2].label, "pld:num_tokens=4");
  EXPECT_EQ(m[2].strategy, "pld");
  EXPECT_EQ(m[2].option("num_tokens"), "4");
  // Only the driver's presets are overridden: two specs of one strategy are two methods (a second one used to
  // overwrite the first, so `compare -s pld -s pld:num_tokens=2` showed one row).
  c = tiny_config("compare");
  c.strategy_specs = {"pld", "pld:num_tokens=2"};
  const auto both = experiment_methods(c);
  ASSERT_EQ(both.size(), 3u);
  EXPECT_EQ(both[1].label, "pld");
  EXPECT_EQ(both[1].option("num_tokens"), "");
  EXPECT_EQ(both[2].label, "pld:num_tokens=2");
  EXPECT_EQ(both[2].option("num_tokens"), "2");
}

TEST(Drivers, EachStrategyGetsTheUnlabelledHeadOfItsKind) {
  const std::string medusa = testing::temp_dir() + "/drivers-medusa-heads";
  fs::create_directories(medusa);
  MedusaHeads::random(*tiny().target, 3)->save(medusa);
  ExperimentConfig c = tiny_config("compare");
  c.heads = {{"", medusa}, {"", head_dir()}};
  c.strategy_specs = {"medusa", "eagle2", "static-tree"};
  auto m = experiment_methods(c);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[1].option("head"), medusa);
  EXPECT_EQ(m[2].option("head"), head_dir());
  EXPECT_EQ(m[3].option("head"), head_dir());

  // speed runs every strategy whose head is given: Medusa's only beside Medusa heads.
  auto head_of = [](const std::vector<MethodSpec>& methods) {
    std::map<std::string, std::string> h;
    for (const auto& x : methods) h[x.strategy] = x.option("head");
    return h;
  };
  c = tiny_config("speed");
  EXPECT_FALSE(head_of(experiment_methods(c)).count("medusa"));
  c.heads.push_back({"", medusa});
  auto heads = head_of(experiment_methods(c));
  EXPECT_EQ(heads.at("medusa"), medusa);
  EXPECT_EQ(heads.at("eagle2"), head_dir());

  // The EAGLE-only drivers want an EAGLE head.
  c = tiny_config("alpha");
  c.heads = {{"", medusa}};
  expect_error([&] { experiment_methods(c); }, {"exp alpha", "--head"});

  // Both heads recorded in the results file, by kind.
  c = tiny_config("compare");
  c.heads = {{"", head_dir()}, {"", medusa}};
  c.prompts = {"once upon a time"};
  c.strategy_specs = {"medusa:tree=cartesian,top_k=2"};
  const ResultsFile r = run_and_check(c);
  const auto models = nlohmann::json::parse(r.attributes.at("models"));
  EXPECT_EQ(models["head:eagle"]["path"], head_dir());
  EXPECT_EQ(models["head:medusa"]["path"], medusa);
  EXPECT_EQ(models["head:medusa"]["sha256"], sha256_file(medusa + "/model.safetensors"));
}

}  // namespace
}  // namespace draftlab
