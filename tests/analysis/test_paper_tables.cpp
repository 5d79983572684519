// The paper tables from hand-made files: the right rows and cells in the papers' layouts, Markdown and LaTeX.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "analysis/by_category.h"
#include "analysis/experiment_catalog.h"
#include "analysis/paper_tables.h"
#include "run_builder.h"
#include "test_errors.h"

using namespace draftlab;
using namespace draftlab::analysis;
using draftlab::testing::chain;
using draftlab::testing::CycleSpec;
using draftlab::testing::make_run;
using draftlab::testing::make_vanilla;

namespace {

// speed-like file: vanilla (4 s per question) and two methods on mt_bench and gsm8k at T = 0.
//   eagle2: 2 s -> 2.00x, cycles accepting 3, 3 -> tau 4.00;  chain: 3.2 s -> 1.25x, 1 and 0 -> tau 1.50
ResultsFile speed_file(const std::string& experiment) {
  ResultsFile f;
  f.attributes = {{"experiment", experiment}, {"host", "box"}, {"cpu", "Test CPU"}, {"blas", "OpenBLAS"},
                  {"device", "cpu"}, {"dtype", "float32"}, {"git_commit", "abc123"}, {"date", "2024-06-01"},
                  {"models", R"({"target": {"path": "data/models/ts-tiny/", "sha256": "0123456789abcdef"}})"}};
  f.threads = 2;
  for (const std::string d : {"mt_bench", "gsm8k"}) {
    f.runs.push_back(make_vanilla(d, 0.0, {1, 2}, {4.0, 4.0}));
    f.runs.push_back(make_run("eagle2", "eagle2", d, 0.0, {{1, 0, 2.0, {chain(3)}, 1}, {2, 0, 2.0, {chain(3)}, 1}}));
    f.runs.push_back(make_run("EAGLE chain", "eagle-chain", d, 0.0,
                              {{1, 0, 3.2, {chain(1)}, 1}, {2, 0, 3.2, {chain(0)}, 0}}));
  }
  return f;
}

std::vector<std::string> texts(const std::vector<Cell>& row) {
  std::vector<std::string> out;
  for (const Cell& c : row) out.push_back(c.text);
  return out;
}

}  // namespace

TEST(PaperTables, SpeedIsEagle2Table1Layout) {
  const Report r = paper_tables(speed_file("speed"), "speed.h5");
  ASSERT_EQ(r.tables.size(), 1u);  // one temperature
  const Table& t = r.tables[0];
  EXPECT_EQ(t.title, "Temperature = 0");
  EXPECT_EQ(t.columns, (std::vector<std::string>{"Method", "Speedup", "τ", "Speedup", "τ", "Speedup", "τ"}));
  ASSERT_EQ(t.groups.size(), 4u);
  EXPECT_EQ(t.groups[1].first, "MT-bench");
  EXPECT_EQ(t.groups[2].first, "GSM8K");
  EXPECT_EQ(t.groups[3].first, "Mean");
  ASSERT_EQ(t.rows.size(), 2u);  // vanilla is the baseline, not a row
  EXPECT_EQ(texts(t.rows[0]), (std::vector<std::string>{"eagle2", "2.00x", "4.00", "2.00x", "4.00", "2.00x", "4.00"}));
  EXPECT_EQ(texts(t.rows[1]),
            (std::vector<std::string>{"EAGLE chain", "1.25x", "1.50", "1.25x", "1.50", "1.25x", "1.50"}));
  // vanilla: 4 tokens per question in 4 s -> 1.0 tokens/s; identical: eagle2 2 + 2, chain 1 + 1 of 8
  const std::string md = render_markdown(r);
  EXPECT_NE(md.find("| Method | MT-bench Speedup | MT-bench τ | GSM8K Speedup |"), std::string::npos) << md;
  EXPECT_NE(md.find("| eagle2 | 2.00x | 4.00 | 2.00x | 4.00 | 2.00x | 4.00 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Vanilla tokens/s: MT-bench 1.0, GSM8K 1.0."), std::string::npos) << md;
  EXPECT_NE(md.find("identical to vanilla on 6/8 question turns"), std::string::npos) << md;
  EXPECT_NE(md.find("Machine: box (Test CPU), 2 threads, OpenBLAS, cpu float32. Models: target ts-tiny "
                    "[sha256 01234567]. Commit abc123"),
            std::string::npos)
      << md;
}

// The drafters table adds what each drafter pays per cycle and its acceptance by slot, mean over the sets:
//   mt_bench: cycles accepting 3 and 1 of 4-node chains, draft 2 + 4 ms, verify 10 + 10 ms
//     -> 3 ms / cycle, 6 ms / 8 nodes = 750 µs, 4 nodes, 10 ms, all drafting; α 1, 1/2, 1, 0
//   gsm8k: one chain accepting 0, one cycle drafting nothing, draft 1 + 1 ms, verify 4 + 2 ms
//     -> 1 ms, 2 ms / 4 nodes = 500 µs, 2 nodes, 3 ms, half drafting; α1 0, nothing reaches slot 2
TEST(PaperTables, DraftersAddDraftCostAndAcceptanceBySlot) {
  ResultsFile f = speed_file("drafters");
  f.runs.clear();
  const std::vector<std::vector<CycleSpec>> cycles = {{chain(3), chain(1)}, {chain(0), CycleSpec{}}};
  const std::vector<std::vector<double>> draft = {{0.002, 0.004}, {0.001, 0.001}}, verify = {{0.010, 0.010}, {0.004, 0.002}};
  const std::vector<std::string> sets = {"mt_bench", "gsm8k"};
  for (size_t d = 0; d < sets.size(); ++d) {
    f.runs.push_back(make_vanilla(sets[d], 0.0, {1}, {4.0}));
    RunRecord run = make_run("pard k=4", "chain", sets[d], 0.0, {{1, 0, 2.0, cycles[d], 1}});
    run.cycles.draft_seconds = draft[d];
    run.cycles.verify_seconds = verify[d];
    f.runs.push_back(run);
  }
  const Report r = paper_tables(f, "drafters.h5");
  ASSERT_EQ(r.tables.size(), 2u);  // speedup and τ, then the cost table
  const Table& t = r.tables[1];
  EXPECT_EQ(t.title, "Temperature = 0: draft cost and acceptance by slot (mean over sets)");
  EXPECT_EQ(t.columns, (std::vector<std::string>{"Method", "Draft ms / cycle", "Draft µs / node", "Nodes / cycle",
                                                 "Verify ms / cycle", "Drafting cycles", "α1", "α2", "α3", "α4"}));
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(texts(t.rows[0]), (std::vector<std::string>{"pard k=4", "2.00", "625", "3.00", "6.50", "75%", "0.50",
                                                        "0.50", "1.00", "0.00"}));
}

TEST(PaperTables, IntervalsWhenAsked) {
  TableOptions options;
  options.intervals = true;
  const Report r = paper_tables(speed_file("speed"), "speed.h5", options);
  // eagle2's questions are identical: the interval has zero width
  EXPECT_EQ(r.tables[0].rows[0][1].text, "2.00x [2.00, 2.00]");
  // chain: tau per question 2 and 1 -> resampled ratios span [1, 2]
  EXPECT_EQ(r.tables[0].rows[1][2].text, "1.50 [1.00, 2.00]");
}

TEST(PaperTables, LatexEscapesAndUsesMath) {
  const std::string tex = render_latex(paper_tables(speed_file("ablate-eagle2"), "a.h5"));
  EXPECT_NE(tex.find("\\multicolumn{2}{c}{MT-bench}"), std::string::npos) << tex;
  EXPECT_NE(tex.find("Method & Speedup & $\\tau$"), std::string::npos) << tex;
  EXPECT_NE(tex.find("eagle2 & 2.00x & 4.00"), std::string::npos) << tex;
  EXPECT_EQ(latex_escape("mt_bench 50% & #1"), "mt\\_bench 50\\% \\& \\#1");
}

TEST(PaperTables, AlphaIsEagleTable2) {
  ResultsFile f = speed_file("alpha");
  // chain cycles on mt_bench: accepted 1 and 0 nodes -> 0-alpha 1/2, 1-alpha 0/1, 2-alpha and on: none tested
  const Report r = paper_tables(f, "alpha.h5");
  const Table& t = r.tables[0];
  EXPECT_EQ(t.columns, (std::vector<std::string>{"T", "Dataset", "Method", "τ", "0-α", "1-α", "2-α", "3-α", "4-α"}));
  ASSERT_EQ(t.rows.size(), 4u);  // 2 methods x 2 datasets
  EXPECT_EQ(texts(t.rows[1]),
            (std::vector<std::string>{"0", "MT-bench", "EAGLE chain", "1.50", "0.50", "0.00", "–", "–", "–"}));
  // eagle2 accepted 3 of 4 in both cycles: 0..2-alpha = 1, 3-alpha = 0
  EXPECT_EQ(texts(t.rows[0]),
            (std::vector<std::string>{"0", "MT-bench", "eagle2", "4.00", "1.00", "1.00", "1.00", "0.00", "–"}));
}

TEST(PaperTables, TreeVsChainShowsTheGain) {
  const Report r = paper_tables(speed_file("tree-vs-chain"), "t.h5");
  const Table& t = r.tables[0];
  ASSERT_EQ(t.rows.size(), 2u);  // one per dataset
  // methods in order of appearance: eagle2 (tree) then EAGLE chain: tree gain 4.00 - 1.50
  EXPECT_EQ(texts(t.rows[0]),
            (std::vector<std::string>{"MT-bench", "0", "4.00 (+2.50)", "2.00x", "1.50", "1.25x"}));
}

TEST(PaperTables, SweepMarksTheBestPoint) {
  ResultsFile f = speed_file("sweep");
  f.runs.erase(f.runs.begin() + 3, f.runs.end());  // mt_bench only
  f.runs[1].grid_json = R"({"index": 1, "total_tokens": 60, "depth": 6})";  // index: sharding only, no column
  f.runs[2].grid_json = R"({"index": 0, "total_tokens": 20, "depth": 6})";
  const Report r = paper_tables(f, "s.h5");
  const Table& t = r.tables[0];
  EXPECT_EQ(t.columns[0], "total_tokens");
  EXPECT_EQ(t.columns[1], "depth");
  ASSERT_EQ(t.rows.size(), 2u);
  // sorted by grid value: 20 first (1.25x), then 60 (2.00x, the best)
  EXPECT_EQ(t.rows[0][0].text, "20");
  EXPECT_FALSE(t.rows[0][0].bold);
  EXPECT_EQ(t.rows[1][0].text, "60");
  EXPECT_TRUE(t.rows[1][0].bold);
  EXPECT_EQ(t.rows[1].back().text, "←");
  EXPECT_NE(render_markdown(r).find("| **60** | **6** |"), std::string::npos);
  EXPECT_NE(t.notes[0].find("total_tokens=60, depth=6 (2.00x"), std::string::npos) << t.notes[0];
}

TEST(PaperTables, CalibrationAndPositionsTables) {
  ResultsFile f = speed_file("calibration");
  const Report cal = paper_tables(f, "c.h5");
  // two non-vanilla runs per dataset, each a bins table and a per-depth table
  ASSERT_EQ(cal.tables.size(), 8u);
  // eagle2 on mt_bench: every node has confidence 0.5 (bin [0.50, 0.55)); tested 4 + 4, accepted 3 + 3
  ASSERT_EQ(cal.tables[0].rows.size(), 1u);
  EXPECT_EQ(texts(cal.tables[0].rows[0]),
            (std::vector<std::string>{"[0.50, 0.55)", "8", "8", "6", "0.750", "0.500"}));
  EXPECT_NE(cal.tables[0].notes[0].find("ECE 0.2500 over 8 tested nodes"), std::string::npos) << cal.tables[0].notes[0];

  f.attributes["experiment"] = "positions";
  for (RunRecord& run : f.runs)
    if (run.method == "EAGLE chain") run.draft_shape = draft_shapes::static_tree;  // the shape, not the name, counts
  const Report pos = paper_tables(f, "p.h5");
  ASSERT_EQ(pos.tables.size(), 2u);  // the two static-tree runs
  ASSERT_EQ(pos.tables[0].rows.size(), 4u);
  // P1 on mt_bench: q1 accepted (1/1), q2 rejected (0/1) -> pooled 0.5, mean 0.5, sd 0.707, min 0, max 1
  EXPECT_EQ(texts(pos.tables[0].rows[0]),
            (std::vector<std::string>{"P1", "1", "2", "0.500", "0.500", "0.707", "0.000", "1.000"}));
}

TEST(PaperTables, MoeIsEagleTable3WithTheExpertsEachCycleReads) {
  // A mixture of experts with 2 layers, top-2: vanilla reads 4 (layer, expert) pairs per one-token cycle; eagle2's
  // verifications read 6 and 8 over cycles emitting 4 tokens each.
  ResultsFile f = speed_file("moe");
  for (RunRecord& run : f.runs) {
    for (size_t c = 0; c < run.cycles.size(); ++c)
      run.cycles.experts_read[c] = run.strategy == "vanilla" ? 4 : (c % 2 == 0 ? 6 : 8);
  }
  const Report r = paper_tables(f, "moe.h5");
  EXPECT_EQ(r.heading.rfind("EAGLE Table 3: ", 0), 0u) << r.heading;
  ASSERT_EQ(r.tables.size(), 1u);
  const Table& t = r.tables[0];
  EXPECT_EQ(t.columns, (std::vector<std::string>{"T", "Dataset", "Method", "Speedup", "τ", "0-α", "1-α", "2-α", "3-α",
                                                 "4-α", "Experts read / cycle", "Experts read / token"}));
  ASSERT_EQ(t.rows.size(), 6u);  // the baseline first in each dataset
  const auto vanilla = texts(t.rows[0]);
  EXPECT_EQ(vanilla[2], "vanilla");
  EXPECT_EQ(vanilla[3], "1.00x");
  EXPECT_EQ(vanilla[10], "4.0");
  EXPECT_EQ(vanilla[11], "4.0");
  const auto eagle2 = texts(t.rows[1]);
  EXPECT_EQ(eagle2[2], "eagle2");
  EXPECT_EQ(eagle2[10], "7.0");  // (6 + 8) / 2
  EXPECT_EQ(eagle2[11], "1.8");  // 14 over 8 tokens
}

TEST(PaperTables, UnknownExperimentNamesFileAndField) {
  draftlab::testing::expect_error([] { paper_tables(speed_file("frobnicate"), "x.h5"); },
                                  {"x.h5", "experiment", "speed", "sweep", "frobnicate"});
}

TEST(PaperTables, EveryDriverOfTheCatalogHasTables) {
  const std::vector<std::string> drivers = driver_names();
  ASSERT_EQ(drivers.size(), 17u);  // fifteen paper experiments, the 2026 drafters and compare (quantized: a benchmark)
  EXPECT_EQ(drivers[0], "speed");
  for (const std::string& name : drivers) {
    const ExperimentEntry& e = find_catalog_entry(name);
    const Report r = paper_tables(speed_file(name), "x.h5");
    EXPECT_EQ(r.heading, paper_item_or_name(e) + ": " + e.heading);
    EXPECT_FALSE(r.tables.empty()) << name;
  }
  EXPECT_EQ(paper_tables(speed_file("speed"), "x.h5").heading.rfind("EAGLE-2 Table 1: ", 0), 0u);
  EXPECT_EQ(paper_tables(speed_file("sweep"), "x.h5").heading.rfind("Sweep: ", 0), 0u);
}

TEST(PaperTables, ABenchmarkOfTheCatalogIsNotAResultsFileExperiment) {
  ASSERT_FALSE(find_catalog_entry("quantized").driver);
  draftlab::testing::expect_error([] { paper_tables(speed_file("quantized"), "x.h5"); },
                                  {"x.h5", "experiment", "quantized"});
}

TEST(ExperimentCatalog, ReproduceListHasEveryRunOnceInCatalogOrder) {
  // run, file, experiment, paper item, prepare, note
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(reproduce_list_text());
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, '\t');) fields.push_back(cell);
    ASSERT_EQ(fields.size(), 6u) << line;
    rows.push_back(fields);
  }
  std::vector<std::string> expected;
  for (const ExperimentEntry& e : experiment_catalog())
    for (const ExperimentEntry::Run& run : e.runs) expected.push_back(run.name);
  ASSERT_EQ(rows.size(), expected.size());
  std::set<std::string> seen;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][0], expected[i]);
    EXPECT_TRUE(seen.insert(rows[i][0]).second) << rows[i][0];
    const ExperimentEntry& e = find_catalog_entry(rows[i][2]);
    EXPECT_EQ(rows[i][1], rows[i][0] + (e.driver ? ".h5" : ".md"));
    EXPECT_FALSE(rows[i][4].empty()) << rows[i][0];  // "-" when nothing runs first
    EXPECT_FALSE(rows[i][5].empty()) << "no reproduce note for " << rows[i][0];
  }
  EXPECT_TRUE(seen.count("moe-dense"));
  EXPECT_FALSE(seen.count("compare"));  // compare is a command, not a paper item
}

TEST(ExperimentCatalog, UnknownNamesListTheCatalog) {
  draftlab::testing::expect_error([] { find_catalog_entry("frobnicate"); }, {"speed", "quantized", "frobnicate"});
}

TEST(PaperTables, BaselineIsFoundByDraftShapeNotByName) {
  ResultsFile f = speed_file("speed");
  for (RunRecord& run : f.runs) {
    if (run.strategy == "vanilla") run.strategy = "plain-decoding";  // any name: draft_shape none marks the baseline
  }
  const Report r = paper_tables(f, "x.h5");
  ASSERT_EQ(r.tables[0].rows.size(), 2u);
  EXPECT_EQ(r.tables[0].rows[0][1].text, "2.00x");
}

namespace draftlab::analysis {
namespace {

TEST(TableFormat, TextColumnsAlignByCharactersNotBytes) {
  Table t;
  t.columns = {"method", "τ", "speedup"};
  t.rows = {{"eagle2 (tt=4 d=4 k=1)", "2.64", Cell("1.52x", true)}, {"pld", "τ?", "0.91x"}};
  const std::string text = render_text(t);
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) lines.push_back(text.substr(at, nl - at));
  ASSERT_EQ(lines.size(), 3u);
  auto width = [](const std::string& s) {
    size_t n = 0;
    for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
    return n;
  };
  // Numbers right-aligned (the bold cell's '*' past the column's numbers), τ one character wide.
  EXPECT_EQ(lines[1], "eagle2 (tt=4 d=4 k=1)  2.64   1.52x*");
  EXPECT_EQ(lines[2], "pld                    τ?     0.91x");
  EXPECT_EQ(width(lines[1]), width(lines[2]) + 1);
  EXPECT_EQ(lines[0].substr(0, 6), "method");
}

}  // namespace
}  // namespace draftlab::analysis

namespace draftlab::analysis {
namespace {

// Four question turns in two categories, cycles and nodes behind each; split by category, each part holds exactly
// its questions' rows (the validator checks every offset and back-reference), and τ / tokens/s are recomputed.
TEST(ByCategory, SplitRunsKeepEveryRowWithItsQuestion) {
  ResultsFile f = speed_file("speed");
  for (RunRecord& run : f.runs)
    for (size_t i = 0; i < run.questions.size(); ++i) run.questions.category[i] = i % 2 ? "coding" : "writing";
  const ResultsFile split = split_by_category(f, CategoryGrouping::Category);
  EXPECT_NO_THROW(validate_results(split, "split"));
  size_t questions = 0, cycles = 0, nodes = 0;
  for (const RunRecord& r : split.runs) {
    questions += r.questions.size();
    cycles += r.cycles.size();
    nodes += r.nodes.size();
    for (const auto& c : r.questions.category) EXPECT_EQ(r.dataset, r.dataset.substr(0, r.dataset.find(':')) + ":" + c);
    double sum = 0;
    for (int32_t a : r.cycles.accept_length) sum += a;
    if (!r.cycles.size()) continue;
    EXPECT_DOUBLE_EQ(r.tau, sum / r.cycles.size());
  }
  size_t want_q = 0, want_c = 0, want_n = 0;
  for (const RunRecord& r : f.runs) {
    want_q += r.questions.size();
    want_c += r.cycles.size();
    want_n += r.nodes.size();
  }
  EXPECT_EQ(questions, want_q);
  EXPECT_EQ(cycles, want_c);
  EXPECT_EQ(nodes, want_n);
  EXPECT_EQ(split.runs.size(), 2 * f.runs.size());
  // The speed table gets one column pair per category, each paired with the baseline's part of the same key.
  const Report r = paper_tables(split, "split.h5");
  const std::string md = render_markdown(r);
  EXPECT_NE(md.find(":writing"), std::string::npos) << md;
  EXPECT_NE(md.find(":coding"), std::string::npos) << md;

  EXPECT_EQ(category_key("mt_bench", "writing", false, CategoryGrouping::Subtask), "mt_bench");
  EXPECT_EQ(category_key("spec_bench", "roleplay", false, CategoryGrouping::Subtask), "spec_bench:mt_bench");
  EXPECT_EQ(category_key("spec_bench", "translation", false, CategoryGrouping::Subtask), "spec_bench:translation");
  EXPECT_EQ(category_key("gsm8k", "math", true, CategoryGrouping::Category), "gsm8k");  // one category: the file
  EXPECT_EQ(split_by_category(f, CategoryGrouping::File).runs.size(), f.runs.size());
  draftlab::testing::expect_error([] { parse_category_grouping("topic"); }, {"--by", "subtask", "'topic'"});
}

}  // namespace
}  // namespace draftlab::analysis
