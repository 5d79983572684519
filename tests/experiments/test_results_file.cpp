// Results files (docs/results-schema.md): write -> read gives back every table, merge = concatenation, bad files
// give errors naming the file and the field, a failed write leaves nothing behind; Spec-Bench JSONL; SHA-256.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/base/file_bytes.h"
#include "core/base/sha256.h"
#include "core/results/results_file.h"
#include "experiments/results/spec_bench_jsonl.h"
#include "test_errors.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using testing::expect_error;
using testing::source_path;
namespace fs = std::filesystem;

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// A run with `questions` question turns; question q has q + 1 cycles, cycle c of it drafts c nodes (a chain).
RunRecord make_run(const std::string& method, int questions, double temperature, int salt) {
  RunRecord r;
  r.method = method;
  r.strategy = method == "vanilla" ? "vanilla" : "eagle2";
  r.draft_shape = method == "vanilla" ? draft_shapes::none : draft_shapes::dynamic_tree;
  r.options_json = R"({"total_tokens": "60", "depth": "6"})";
  r.dataset = "mt_bench";
  r.temperature = temperature;
  r.repeats = 3;
  r.warmup = 1;
  r.tokens_per_second = 123.5 + salt;
  r.tau = 2.25;
  r.shard = "1/2";
  if (salt % 2) r.grid_json = R"({"total_tokens": 60, "depth": 6, "top_k": 10})";
  for (int q = 0; q < questions; ++q) {
    QuestionRows& qr = r.questions;
    qr.question_id.push_back(81 + q / 2);
    qr.category.push_back(q % 2 ? "" : "writing \xc3\xa9");  // UTF-8 survives
    qr.turn.push_back(q % 2);
    qr.prompt_tokens.push_back(10 + q);
    qr.new_tokens.push_back(5 * q + salt);
    qr.wall_seconds.push_back(0.5 + q);
    qr.cycles.push_back(q + 1);
    qr.draft_seconds.push_back(0.125 * q);
    qr.verify_seconds.push_back(0.25 * q);
    qr.cycle_offset.push_back(static_cast<int64_t>(r.cycles.size()));
    qr.identical.push_back(static_cast<int8_t>(q % 3 - 1));
    qr.answer.push_back("answer " + std::to_string(q) + " of " + method);
    for (int c = 0; c <= q; ++c) {
      CycleRows& cr = r.cycles;
      cr.question.push_back(q);
      cr.drafted.push_back(c);
      cr.accept_length.push_back(1 + c / 2);
      cr.draft_seconds.push_back(0.01 * c);
      cr.verify_seconds.push_back(0.02 * c);
      cr.experts_read.push_back(16 + c);
      cr.node_offset.push_back(static_cast<int64_t>(r.nodes.size()));
      for (int k = 0; k < c; ++k) {
        NodeRows& nr = r.nodes;
        nr.cycle.push_back(static_cast<int64_t>(cr.size() - 1));
        nr.depth.push_back(k + 1);
        nr.tree_index.push_back(k + 1);
        nr.parent.push_back(k);
        nr.sibling_rank.push_back(0);
        nr.confidence.push_back(k == 1 ? kNaN : 0.5f + 0.1f * k);
        nr.value.push_back(k == 1 ? kNaN : 0.25f);
        nr.accepted.push_back(k < c / 2 ? 1 : 0);
      }
    }
  }
  return r;
}

ResultsFile make_results(const std::string& experiment) {
  ResultsFile f;
  f.attributes = {{"experiment", experiment}, {"git_commit", "abc1234-dirty"}, {"command_line", "draftlab exp speed"},
                  {"date", "2024-01-01T00:00:00Z"}, {"host", "h"}, {"cpu", "x avx2"}, {"blas", "OpenBLAS"},
                  {"device", "cpu"}, {"dtype", "float32"}, {"models", R"({"target": {"path": "m", "sha256": "00"}})"},
                  {"shard", "0/1"}, {"settings", R"({"questions": 2})"}};
  f.threads = 2;
  f.seed = 7;
  f.runs.push_back(make_run("vanilla", 3, 0.0, 0));
  f.runs.push_back(make_run("eagle2", 4, 1.0, 1));
  f.runs.push_back(make_run("empty", 0, 0.0, 2));
  // --oracle rows for the second run (optional table: the others write none): question rows 0 and 2.
  OracleRows& o = f.runs[1].oracle;
  o.question = {0, 0, 0, 2, 2};
  o.position = {0, 1, 2, 0, 1};
  o.matched = {2, 0, 1, 3, 0};
  o.drafted = {4, 4, 4, 6, 6};
  TrainingCurves t;
  t.train_step = {1, 2, 3};
  t.train_loss = {3.0, 2.5, 2.0};
  t.learning_rate = {1e-3, 1e-3, 5e-4};
  t.eval_step = {0, 3};
  t.eval_loss = {3.1, 2.2};
  t.eval_metrics["accuracy"] = {{0.1}, {0.4}};
  t.eval_metrics["alpha"] = {{0.5, 0.6, 0.7, 0.8, 0.9, 0.91, 0.92, 0.93}, {0.55, 0.65, 0.75, 0.85, 0.95, 0.96, 0.97, 0.98}};
  t.eval_metrics["head_accuracy"] = {{0.2, 0.1, 0.05}, {0.3, 0.2, 0.1}};  // dropped from results files before
  t.attributes = {{"command_line", "draftlab train-head"}, {"seed", "3"}};
  f.training["head"] = t;
  return f;
}

template <typename T>
void expect_same_column(const std::vector<T>& a, const std::vector<T>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    }
    EXPECT_EQ(a[i], b[i]) << what << "[" << i << "]";
  }
}

void expect_same_run(const RunRecord& a, const RunRecord& b) {
  EXPECT_EQ(a.method, b.method);
  EXPECT_EQ(a.strategy, b.strategy);
  EXPECT_EQ(a.draft_shape, b.draft_shape);
  EXPECT_EQ(a.options_json, b.options_json);
  EXPECT_EQ(a.dataset, b.dataset);
  EXPECT_EQ(a.temperature, b.temperature);
  EXPECT_EQ(a.repeats, b.repeats);
  EXPECT_EQ(a.warmup, b.warmup);
  EXPECT_EQ(a.tokens_per_second, b.tokens_per_second);
  EXPECT_EQ(a.tau, b.tau);
  EXPECT_EQ(a.grid_json, b.grid_json);
  EXPECT_EQ(a.shard, b.shard);
  const auto &qa = a.questions, &qb = b.questions;
  expect_same_column(qa.question_id, qb.question_id, "question_id");
  expect_same_column(qa.category, qb.category, "category");
  expect_same_column(qa.turn, qb.turn, "turn");
  expect_same_column(qa.prompt_tokens, qb.prompt_tokens, "prompt_tokens");
  expect_same_column(qa.new_tokens, qb.new_tokens, "new_tokens");
  expect_same_column(qa.wall_seconds, qb.wall_seconds, "wall_seconds");
  expect_same_column(qa.cycles, qb.cycles, "cycles");
  expect_same_column(qa.draft_seconds, qb.draft_seconds, "draft_seconds");
  expect_same_column(qa.verify_seconds, qb.verify_seconds, "verify_seconds");
  expect_same_column(qa.cycle_offset, qb.cycle_offset, "cycle_offset");
  expect_same_column(qa.identical, qb.identical, "identical");
  expect_same_column(qa.answer, qb.answer, "answer");
  const auto &ca = a.cycles, &cb = b.cycles;
  expect_same_column(ca.question, cb.question, "cycles/question");
  expect_same_column(ca.accept_length, cb.accept_length, "accept_length");
  expect_same_column(ca.drafted, cb.drafted, "drafted");
  expect_same_column(ca.draft_seconds, cb.draft_seconds, "cycles/draft_seconds");
  expect_same_column(ca.verify_seconds, cb.verify_seconds, "cycles/verify_seconds");
  expect_same_column(ca.experts_read, cb.experts_read, "cycles/experts_read");
  expect_same_column(ca.node_offset, cb.node_offset, "node_offset");
  const auto &na = a.nodes, &nb = b.nodes;
  expect_same_column(na.cycle, nb.cycle, "nodes/cycle");
  expect_same_column(na.depth, nb.depth, "depth");
  expect_same_column(na.tree_index, nb.tree_index, "tree_index");
  expect_same_column(na.parent, nb.parent, "parent");
  expect_same_column(na.sibling_rank, nb.sibling_rank, "sibling_rank");
  expect_same_column(na.confidence, nb.confidence, "confidence");
  expect_same_column(na.value, nb.value, "value");
  expect_same_column(na.accepted, nb.accepted, "accepted");
  const auto &oa = a.oracle, &ob = b.oracle;
  expect_same_column(oa.question, ob.question, "oracle/question");
  expect_same_column(oa.position, ob.position, "oracle/position");
  expect_same_column(oa.matched, ob.matched, "oracle/matched");
  expect_same_column(oa.drafted, ob.drafted, "oracle/drafted");
}

void expect_same_training(const TrainingCurves& a, const TrainingCurves& b) {
  EXPECT_EQ(a.train_step, b.train_step);
  EXPECT_EQ(a.train_loss, b.train_loss);
  EXPECT_EQ(a.learning_rate, b.learning_rate);
  EXPECT_EQ(a.eval_step, b.eval_step);
  EXPECT_EQ(a.eval_loss, b.eval_loss);
  EXPECT_EQ(a.eval_metrics, b.eval_metrics);
  EXPECT_EQ(a.attributes, b.attributes);
}

using testing::fresh_dir;

TEST(ResultsFile, RoundTripKeepsEveryTableAndAttribute) {
  const std::string path = fresh_dir("roundtrip") + "/r.h5";
  const ResultsFile f = make_results("speed");
  write_results(path, f);
  const ResultsFile g = read_results(path);
  auto want = f.attributes;
  want["schema"] = kResultsSchema;
  EXPECT_EQ(g.attributes, want);
  EXPECT_EQ(g.threads, 2);
  EXPECT_EQ(g.seed, 7);
  ASSERT_EQ(g.runs.size(), f.runs.size());
  for (size_t i = 0; i < f.runs.size(); ++i) expect_same_run(f.runs[i], g.runs[i]);
  ASSERT_EQ(g.training.size(), 1u);
  expect_same_training(f.training.at("head"), g.training.at("head"));
}

TEST(ResultsFile, FileIsReadableByOtherHdf5ToolsWithTheDocumentedTypes) {
  const std::string path = fresh_dir("types") + "/r.h5";
  write_results(path, make_results("speed"));
  H5::H5File file(path, H5F_ACC_RDONLY);
  // The optional oracle table is written only where it has rows, so files without it look as they always did.
  EXPECT_GT(H5Lexists(file.getId(), "/runs/0001/oracle", H5P_DEFAULT), 0);
  EXPECT_EQ(H5Lexists(file.openGroup("/runs/0000").getId(), "oracle", H5P_DEFAULT), 0);
  auto type_of = [&](const std::string& name) { return file.openDataSet(name).getDataType(); };
  EXPECT_EQ(type_of("/runs/0001/questions/question_id").getSize(), 8u);
  EXPECT_EQ(type_of("/runs/0001/questions/turn").getSize(), 4u);
  EXPECT_EQ(type_of("/runs/0001/questions/identical").getSize(), 1u);
  EXPECT_EQ(type_of("/runs/0001/nodes/confidence").getClass(), H5T_FLOAT);
  EXPECT_EQ(type_of("/runs/0001/nodes/confidence").getSize(), 4u);
  EXPECT_EQ(type_of("/runs/0001/cycles/verify_seconds").getSize(), 8u);
  EXPECT_TRUE(file.openDataSet("/runs/0001/questions/answer").getStrType().isVariableStr());
  hsize_t dims[1] = {0};
  file.openDataSet("/runs/0001/questions/turn").getSpace().getSimpleExtentDims(dims);
  EXPECT_EQ(dims[0], 4u);
}

TEST(ResultsFile, MergeOfTwoShardsIsTheirConcatenation) {
  const std::string dir = fresh_dir("merge");
  ResultsFile a = make_results("sweep"), b = make_results("sweep");
  a.attributes["shard"] = "0/2";
  b.attributes["shard"] = "1/2";
  b.attributes["command_line"] = "other";
  b.runs.erase(b.runs.begin());
  b.runs[0].method = "eagle2 tt=20";
  b.runs[0].shard = "1/2";
  b.training.clear();
  b.training["generated"] = a.training.at("head");
  b.training["generated"].train_loss[0] = 9.0;
  write_results(dir + "/a.h5", a);
  write_results(dir + "/b.h5", b);
  const ResultsFile m = merge_results({dir + "/a.h5", dir + "/b.h5"});
  ASSERT_EQ(m.runs.size(), a.runs.size() + b.runs.size());
  for (size_t i = 0; i < a.runs.size(); ++i) expect_same_run(m.runs[i], a.runs[i]);
  for (size_t i = 0; i < b.runs.size(); ++i) expect_same_run(m.runs[a.runs.size() + i], b.runs[i]);
  EXPECT_EQ(m.attributes.at("shard"), "merged:2");
  EXPECT_EQ(m.attributes.at("command_line"), a.attributes.at("command_line"));
  ASSERT_EQ(m.training.size(), 2u);
  EXPECT_EQ(m.training.at("generated").train_loss[0], 9.0);
  // The merged file is a valid results file again.
  write_results(dir + "/m.h5", m);
  EXPECT_EQ(read_results(dir + "/m.h5").runs.size(), m.runs.size());
}

TEST(ResultsFile, MergeRefusesFilesOfDifferentExperiments) {
  const std::string dir = fresh_dir("merge-bad");
  write_results(dir + "/a.h5", make_results("sweep"));
  write_results(dir + "/b.h5", make_results("speed"));
  expect_error([&] { merge_results({dir + "/a.h5", dir + "/b.h5"}); },
               {dir + "/a.h5", dir + "/b.h5", "experiment", "sweep", "speed"});
}

TEST(ResultsFile, InconsistentTablesAreRefusedNamingRunAndField) {
  const std::string dir = fresh_dir("inconsistent");
  {
    ResultsFile f = make_results("speed");
    f.runs[1].questions.turn.pop_back();
    expect_error([&] { write_results(dir + "/x.h5", f); },
                 {dir + "/x.h5", "/runs/0001/questions/turn", "4 rows", "like /runs/0001/questions/question_id", "3 rows"});
  }
  {
    ResultsFile f = make_results("speed");
    f.runs[1].oracle.position[2] = 3;  // positions count up from 0 within a question
    expect_error([&] { write_results(dir + "/x.h5", f); }, {"/runs/0001/oracle/position[2]", "expected 2", "got 3"});
  }
  {
    ResultsFile f = make_results("speed");
    f.runs[1].oracle.matched[3] = 7;  // more matched than drafted
    expect_error([&] { write_results(dir + "/x.h5", f); }, {"/runs/0001/oracle/matched[3]", "drafted = 6"});
  }
  {
    ResultsFile f = make_results("speed");
    f.runs[1].oracle.question[4] = 4;  // no such question row
    expect_error([&] { write_results(dir + "/x.h5", f); }, {"/runs/0001/oracle/question[4]", "< 4"});
  }
  {
    ResultsFile f = make_results("speed");
    f.runs[1].questions.cycle_offset[2] += 1;
    expect_error([&] { write_results(dir + "/x.h5", f); }, {"/runs/0001/questions/cycle_offset[2]", "expected 3"});
  }
  {
    ResultsFile f = make_results("speed");
    f.runs[0].nodes.cycle[0] = 1;  // the first node belongs to cycle 2 (cycles 0 and 1 draft nothing)
    expect_error([&] { write_results(dir + "/x.h5", f); }, {"/runs/0000/nodes/cycle[0]", "expected 2"});
  }
  {
    ResultsFile f = make_results("speed");
    f.runs[0].cycles.drafted.back() += 1;  // more nodes claimed than exist
    expect_error([&] { write_results(dir + "/x.h5", f); }, {"/runs/0000/cycles/drafted"});
  }
  {
    ResultsFile f = make_results("speed");
    f.runs[0].questions.identical[0] = 2;
    expect_error([&] { write_results(dir + "/x.h5", f); }, {"/runs/0000/questions/identical[0]", "-1, 0 or 1"});
  }
  {
    ResultsFile f = make_results("speed");
    f.attributes["schema"] = "draftlab-results/0";
    expect_error([&] { write_results(dir + "/x.h5", f); }, {"schema", "draftlab-results/3", "draftlab-results/0"});
  }
  {
    ResultsFile f = make_results("speed");
    f.runs[2].draft_shape = "";  // a run that does not say what it drafts
    expect_error([&] { write_results(dir + "/x.h5", f); }, {"/runs/0002 attribute draft_shape", "non-empty"});
    f.runs[2].draft_shape = "eagle2";  // a strategy name is not a shape
    expect_error([&] { write_results(dir + "/x.h5", f); },
                 {"/runs/0002 attribute draft_shape", "one of none, chain, static_tree, dynamic_tree", "'eagle2'"});
  }
  {
    ResultsFile f = make_results("speed");
    f.runs[1].nodes.value.push_back(0.5f);  // the last column of the last table
    expect_error([&] { write_results(dir + "/x.h5", f); }, {"/runs/0001/nodes/value", "like /runs/0001/nodes/cycle"});
  }
  {
    ResultsFile f = make_results("speed");
    f.attributes["gpu"] = "x";  // not declared in results_schema.h: docs/results-schema.md would not list it
    expect_error([&] { write_results(dir + "/x.h5", f); }, {dir + "/x.h5", "attribute gpu", "results_schema.h"});
  }
  EXPECT_TRUE(fs::is_empty(dir)) << "a refused write left a file behind";
}

TEST(ResultsFile, WriteThatFailsMidwayLeavesNeitherFileNorTemporary) {
  const std::string dir = fresh_dir("atomic");
  ResultsFile f = make_results("speed");
  // Runs 0 and 1 are fine and get written to the temporary file; run 2 is broken and found only then.
  f.runs[2] = make_run("late", 2, 0.0, 0);
  f.runs[2].nodes.depth.pop_back();
  expect_error([&] { write_results(dir + "/out.h5", f); }, {dir + "/out.h5", "/runs/0002/nodes/depth"});
  EXPECT_TRUE(fs::is_empty(dir)) << "found " << fs::directory_iterator(dir)->path();
  // An existing file of that name is left as it was.
  write_results(dir + "/out.h5", make_results("speed"));
  expect_error([&] { write_results(dir + "/out.h5", f); }, {"/runs/0002/nodes/depth"});
  EXPECT_EQ(read_results(dir + "/out.h5").runs.size(), 3u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

// Edits a written file with the plain HDF5 API, as a foreign or damaged file would look.
template <class F>
void edit_file(const std::string& path, F f) {
  H5::H5File file(path, H5F_ACC_RDWR);
  f(file);
}

TEST(ResultsFile, ReaderNamesFileAndFieldOfBadFiles) {
  const std::string dir = fresh_dir("bad-files");
  const std::string path = dir + "/r.h5";
  auto fresh = [&] { write_results(path, make_results("speed")); };

  fresh();
  edit_file(path, [](H5::H5File& file) {
    H5::Group root = file.openGroup("/");
    root.removeAttr("schema");
    H5::StrType t(H5::PredType::C_S1, H5T_VARIABLE);
    root.createAttribute("schema", t, H5::DataSpace(H5S_SCALAR)).write(t, std::string("draftlab-results/0"));
  });
  expect_error([&] { read_results(path); }, {path, "schema", "draftlab-results/3", "draftlab-results/0"});

  fresh();
  edit_file(path, [](H5::H5File& file) { file.openGroup("/runs/0002").removeAttr("draft_shape"); });
  expect_error([&] { read_results(path); }, {path, "/runs/0002 attribute draft_shape", "missing"});

  fresh();  // optional attributes: absent = the default
  edit_file(path, [](H5::H5File& file) { file.openGroup("/runs/0000").removeAttr("shard"); });
  EXPECT_EQ(read_results(path).runs[0].shard, "0/1");

  fresh();
  edit_file(path, [](H5::H5File& file) { file.unlink("/runs/0001/nodes/value"); });
  expect_error([&] { read_results(path); }, {path, "/runs/0001/nodes/value", "missing"});

  fresh();
  edit_file(path, [](H5::H5File& file) {
    file.unlink("/runs/0000/questions/turn");
    const hsize_t dims[1] = {3};
    file.createDataSet("/runs/0000/questions/turn", H5::PredType::IEEE_F64LE, H5::DataSpace(1, dims));
  });
  expect_error([&] { read_results(path); }, {path, "/runs/0000/questions/turn", "int32"});

  fresh();
  edit_file(path, [](H5::H5File& file) { file.openGroup("/runs/0001").removeAttr("temperature"); });
  expect_error([&] { read_results(path); }, {path, "/runs/0001 attribute temperature"});

  fresh();
  edit_file(path, [](H5::H5File& file) {
    file.unlink("/runs/0000/cycles/drafted");
    const hsize_t dims[1] = {2};  // 6 cycles, only 2 rows
    const int32_t rows[2] = {1, 2};
    file.createDataSet("/runs/0000/cycles/drafted", H5::PredType::STD_I32LE, H5::DataSpace(1, dims))
        .write(rows, H5::PredType::NATIVE_INT32);
  });
  expect_error([&] { read_results(path); }, {path, "/runs/0000/cycles/drafted", "2 rows"});

  write_file_atomically(dir + "/text.h5", "not hdf5\n");
  expect_error([&] { read_results(dir + "/text.h5"); }, {dir + "/text.h5", "not an HDF5 file"});
  expect_error([&] { read_results(dir + "/none.h5"); }, {dir + "/none.h5", "cannot open"});
}

// Found by fuzzing (tests/fuzz/results_schema_fuzz.cpp, results_file_fuzz.cpp): HDF5 writes into the reader's
// buffer whatever the file declares, so an attribute of many values overran the single value it was read into
// (stack-buffer-overflow), a dataset declaring 2^40 rows without storing them (or a corrupt row count) had the reader
// allocate terabytes, and a variable-length string attribute never written (a null value) crashed HDF5's C++ read.
// Replaces a dataset by one declaring 2^40 rows, chunked and never written: no values stored, yet a size a naive
// reader would allocate.
void replace_by_unwritten_rows(H5::H5File& file, const std::string& name, const H5::PredType& type) {
  file.unlink(name);
  const hsize_t rows[1] = {hsize_t{1} << 40}, chunk[1] = {1024};
  H5::DSetCreatPropList chunked;
  chunked.setChunk(1, chunk);
  file.createDataSet(name, type, H5::DataSpace(1, rows), chunked);
}

TEST(ResultsFile, ReaderRefusesSizesTheFileDoesNotHold) {
  const std::string dir = fresh_dir("oversized");
  const std::string path = dir + "/r.h5";
  auto fresh = [&] { write_results(path, make_results("speed")); };
  const hsize_t many[1] = {64};

  fresh();
  edit_file(path, [&](H5::H5File& file) {
    H5::Group root = file.openGroup("/");
    root.removeAttr("threads");
    const std::vector<int64_t> values(64, 1);
    root.createAttribute("threads", H5::PredType::STD_I64LE, H5::DataSpace(1, many))
        .write(H5::PredType::NATIVE_INT64, values.data());
  });
  expect_error([&] { read_results(path); }, {path, "/ attribute threads", "an integer", "an attribute of 64 values"});

  fresh();
  edit_file(path, [&](H5::H5File& file) {
    H5::Group run = file.openGroup("/runs/0000");
    run.removeAttr("method");
    H5::StrType t(H5::PredType::C_S1, H5T_VARIABLE);
    const std::vector<const char*> values(64, "eagle2");
    run.createAttribute("method", t, H5::DataSpace(1, many)).write(t, values.data());
  });
  expect_error([&] { read_results(path); }, {path, "/runs/0000 attribute method", "an attribute of 64 values"});

  fresh();
  edit_file(path, [](H5::H5File& file) { replace_by_unwritten_rows(file, "/runs/0000/questions/turn", H5::PredType::STD_I32LE); });
  expect_error([&] { read_results(path); },
               {path, "/runs/0000/questions/turn", "1099511627776 values stored in the file"});

  const std::string corrupt = source_path("tests/fuzz/regressions/results_file/corrupt_row_count");  // 4294967300 rows
  expect_error([&] { read_results(corrupt); },
               {corrupt, "/runs/0000/questions/question_id", "more than a file of 19808 bytes can hold"});

  fresh();
  edit_file(path, [](H5::H5File& file) {  // created, never written: a null variable-length string
    H5::Group root = file.openGroup("/");
    root.removeAttr("schema");
    root.createAttribute("schema", H5::StrType(H5::PredType::C_S1, H5T_VARIABLE), H5::DataSpace(H5S_SCALAR));
  });
  expect_error([&] { read_results(path); }, {path, "schema", "draftlab-results/3", "''"});

  // The training log's reader (also that of /training/LABEL in a results file).
  const std::string log = dir + "/log.h5";
  write_training_log(log, make_results("speed").training.begin()->second);
  edit_file(log, [](H5::H5File& file) { replace_by_unwritten_rows(file, "/eval/loss", H5::PredType::IEEE_F64LE); });
  expect_error([&] { read_training_log(log); }, {log, "eval/loss", "values stored in the file"});
  write_training_log(log, make_results("speed").training.begin()->second);
  edit_file(log, [&](H5::H5File& file) {
    H5::StrType t(H5::PredType::C_S1, H5T_VARIABLE);
    const std::vector<const char*> values(64, "x");
    file.openGroup("/").createAttribute("note", t, H5::DataSpace(1, many)).write(t, values.data());
  });
  expect_error([&] { read_training_log(log); }, {log, "attribute note", "an attribute of 64 values"});
}

TEST(ResultsFile, ReadsTheTrainingLogOfAModelInTheRepository) {
  const std::string path = source_path("data/models/ts-tiny-eagle-head/training_log.h5");
  const TrainingCurves t = read_training_log(path);
  ASSERT_FALSE(t.train_step.empty());
  EXPECT_EQ(t.train_loss.size(), t.train_step.size());
  EXPECT_FALSE(t.eval_loss.empty());
  EXPECT_TRUE(t.attributes.count("command_line"));
  // A log written before the metrics existed; the training state's legacy keys read as metrics too.
  EXPECT_EQ(t.metric("alpha"), nullptr);
  const auto legacy = TrainingCurves::from_json(
      R"({"train_step": [1], "train_loss": [2.0], "learning_rate": [0.001], "eval_step": [1], "eval_loss": [2.5],
          "eval_accuracy": [0.25], "eval_alpha": [[0.25, 0.5, 0.5, 0.5, 0.5]]})", "state");
  ASSERT_NE(legacy.metric("alpha"), nullptr);
  EXPECT_EQ(legacy.metric("alpha")->front().size(), 5u);
  EXPECT_EQ(legacy.metric("accuracy")->front(), std::vector<double>{0.25});
  expect_error([&] { read_training_log(source_path("data/models/ts-tiny/config.json")); }, {"config.json"});
  // A log and a results file share one codec: what one writes, the other reads, metrics included.
  const std::string dir = fresh_dir("training_codec");
  write_training_log(dir + "/good.h5", legacy);
  EXPECT_EQ(read_training_log(dir + "/good.h5").eval_metrics, legacy.eval_metrics);
  TrainingCurves bad = legacy;
  bad.eval_metrics["alpha"].push_back({0.5});
  bad.eval_step.push_back(2);
  bad.eval_loss.push_back(2.4);
  bad.eval_metrics["accuracy"].push_back({0.3});
  expect_error([&] { write_training_log(dir + "/bad.h5", bad); }, {"eval/alpha", "rows of one width"});
  EXPECT_FALSE(is_file(dir + "/bad.h5"));
  bad = legacy;
  bad.eval_metrics["beta"] = {};
  expect_error([&] { write_training_log(dir + "/bad.h5", bad); }, {"eval/beta", "a declared training metric"});
}

TEST(SpecBenchJsonl, LinesGroupTurnsPerQuestionAndAgreeWithTheRows) {
  const RunRecord run = make_run("eagle2", 3, 0.0, 0);  // question 81 turns 0 and 1, question 82 turn 0
  const auto lines = spec_bench_lines(run, 1700000000.0);
  ASSERT_EQ(lines.size(), 2u);
  const auto first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["question_id"], 81);
  EXPECT_EQ(first["model_id"], "eagle2");
  EXPECT_EQ(first["category"], "writing \xc3\xa9");
  EXPECT_EQ(first["tstamp"], 1700000000.0);
  const auto& c = first["choices"][0];
  EXPECT_EQ(c["index"], 0);
  EXPECT_EQ(c["turns"], nlohmann::json({"answer 0 of eagle2", "answer 1 of eagle2"}));
  EXPECT_EQ(c["decoding_steps"], nlohmann::json({1, 2}));
  EXPECT_EQ(c["new_tokens"], nlohmann::json({0, 5}));
  EXPECT_EQ(c["wall_time"], nlohmann::json({0.5, 1.5}));
  // Question row 1 has cycles 1..2 (drafted 0, 1): accept lengths 1 + c / 2 = 1, 1. One flat list over the
  // question's turns, as Spec-Bench's loop writes it (its speed.py extends a list with it and takes np.mean).
  EXPECT_EQ(c["accept_lengths"], nlohmann::json::parse("[1, 1, 1]"));
  EXPECT_EQ(first["answer_id"], "eagle2-81");
  const auto second = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(second["question_id"], 82);
  EXPECT_EQ(second["choices"][0]["accept_lengths"], nlohmann::json::parse("[1, 1, 2]"));
}

TEST(SpecBenchJsonl, OneFilePerRunNamedAsSpecBenchModelIds) {
  const std::string dir = fresh_dir("jsonl");
  ResultsFile f = make_results("speed");
  f.attributes["models"] = R"({"target": {"path": "data/models/ts-target/", "sha256": "x"}})";
  f.attributes["dtype"] = "float16";
  f.runs[1].method = "eagle2 w/o value";
  write_spec_bench_jsonl(f, dir, 0.0);
  EXPECT_TRUE(testing::exists(dir + "/mt_bench/ts-target-vanilla-float16-temp-0.0.jsonl"));
  EXPECT_TRUE(testing::exists(dir + "/mt_bench/ts-target-eagle2_w_o_value-float16-temp-1.0.jsonl"));
  f.runs[1].temperature = 0.75;
  EXPECT_EQ(spec_bench_file_name(f, f.runs[1]), "mt_bench/ts-target-eagle2_w_o_value-float16-temp-0.75.jsonl");
  f.runs[1].temperature = 1.0;
  std::ifstream in(dir + "/mt_bench/ts-target-eagle2_w_o_value-float16-temp-1.0.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    EXPECT_NO_THROW(nlohmann::json::parse(line));
    ++n;
  }
  EXPECT_EQ(n, 2);  // questions 81 and 82
  f.runs[2].method = "vanilla";
  expect_error([&] { write_spec_bench_jsonl(f, dir, 0.0); }, {"mt_bench/ts-target-vanilla-float16-temp-0.0.jsonl", "share"});
}

// FIPS 180-2 appendix B test vectors.
TEST(Sha256, MatchesTheFipsVectors) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  // One million 'a' fed in uneven pieces: the block boundary handling.
  Sha256 h;
  const std::string piece(999, 'a');
  for (int i = 0; i < 1000; ++i) h.update(piece.data(), piece.size());
  h.update(std::string(1000, 'a').data(), 1000);
  EXPECT_EQ(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, OfAFileEqualsOfItsBytes) {
  const std::string path = fresh_dir("sha") + "/f.bin";
  std::string bytes;
  for (int i = 0; i < 3000000; ++i) bytes += static_cast<char>(i * 7);
  write_file_atomically(path, bytes);
  EXPECT_EQ(sha256_file(path), sha256_hex(bytes));
  expect_error([&] { sha256_file(path + ".none"); }, {path + ".none"});
}

}  // namespace
}  // namespace draftlab
