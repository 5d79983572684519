// Two writers of the schema agreeing: read_results() (C++, HDF5 API) reads the file tests/analysis/make_fixture.py
// writes with h5py, and the analysis finds the numbers the fixture was built to contain.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "analysis/acceptance.h"
#include "analysis/calibration.h"
#include "analysis/experiment_catalog.h"
#include "analysis/paper_tables.h"
#include "analysis/run_metrics.h"
#include "core/results/results_file.h"
#include "test_paths.h"

using namespace draftlab;
using namespace draftlab::analysis;

namespace {

// The fixture of `experiment` (all are written by one python run per test process); "" when python3 with h5py
// is missing.
std::string fixture(const std::string& experiment) {
  static const bool written = [] {
    if (std::system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") != 0) return false;
    const std::string cmd = "/usr/bin/python3 " + draftlab::testing::source_path("tests/analysis/make_fixture.py") +
                            " --all " + draftlab::testing::temp_dir();
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "failed: " << cmd;
    return true;
  }();
  return written ? draftlab::testing::temp_dir() + "/fixture-" + experiment + ".h5" : "";
}

#define REQUIRE_FIXTURE(path)                                                      \
  if ((path).empty()) GTEST_SKIP() << "/usr/bin/python3 with h5py and numpy missing"

}  // namespace

TEST(PythonFixture, ReadResultsReadsEveryTable) {
  const std::string path = fixture("speed");
  REQUIRE_FIXTURE(path);
  const ResultsFile f = read_results(path);
  EXPECT_EQ(f.attributes.at("schema"), kResultsSchema);
  EXPECT_EQ(f.attributes.at("experiment"), "speed");
  EXPECT_EQ(f.attributes.at("host"), "fixture-host");
  EXPECT_EQ(f.threads, 2);
  EXPECT_EQ(f.seed, 7);
  ASSERT_EQ(f.runs.size(), 16u);  // 2 temperatures x 2 datasets x 4 methods
  const RunRecord& e = f.runs[1];
  EXPECT_EQ(e.method, "eagle2");
  EXPECT_EQ(e.strategy, "eagle2");
  EXPECT_EQ(e.draft_shape, draft_shapes::dynamic_tree);
  EXPECT_EQ(f.runs[0].draft_shape, draft_shapes::none);
  EXPECT_EQ(f.runs[2].draft_shape, draft_shapes::static_tree);
  EXPECT_EQ(f.runs[3].draft_shape, draft_shapes::chain);
  EXPECT_EQ(e.dataset, "mt_bench");
  EXPECT_EQ(e.temperature, 0.0);
  EXPECT_EQ(e.questions.size(), 4u);
  EXPECT_EQ(e.questions.question_id, (std::vector<int64_t>{81, 81, 82, 82}));
  EXPECT_EQ(e.questions.turn, (std::vector<int32_t>{0, 1, 0, 1}));
  EXPECT_EQ(e.questions.category[2], "roleplay");
  EXPECT_EQ(e.questions.new_tokens[0], 16);
  EXPECT_EQ(e.questions.identical[0], 1);
  EXPECT_EQ(e.cycles.size(), 16u);
  ASSERT_EQ(e.nodes.size(), 80u);  // 5 nodes per cycle
  EXPECT_FLOAT_EQ(e.nodes.confidence[0], 0.92f);
  EXPECT_FLOAT_EQ(e.nodes.value[2], 0.92f * 0.82f);
  EXPECT_EQ(e.nodes.parent[4], 2);
  EXPECT_EQ(f.runs[8].temperature, 1.0);
  EXPECT_EQ(f.runs[0].questions.identical[0], -1);  // vanilla
  EXPECT_EQ(f.runs[5].questions.category[0], "");   // gsm8k has no categories
  ASSERT_EQ(f.training.count("eagle-head"), 1u);
  const TrainingCurves& t = f.training.at("eagle-head");
  EXPECT_EQ(t.train_step.size(), 10u);
  EXPECT_EQ(t.eval_step, (std::vector<int64_t>{0, 5, 10}));
  ASSERT_NE(t.metric("alpha"), nullptr);
  EXPECT_EQ(t.metric("alpha")->size(), 3u);  // [3 passes, 5]
  EXPECT_EQ(t.metric("alpha")->at(1).size(), 5u);
  EXPECT_DOUBLE_EQ(t.metric("alpha")->at(1)[0], 0.5);
}

TEST(PythonFixture, AnalysisFindsTheBuiltInNumbers) {
  const std::string path = fixture("speed");
  REQUIRE_FIXTURE(path);
  const ResultsFile f = read_results(path);
  // eagle2 at T = 0: 1.0 s against vanilla's 2.0 s; 4 cycles of 4 tokens per question
  const RunSummary s = summarize_run(f, f.runs[1]);
  EXPECT_NEAR(s.speedup.value, 2.0, 1e-12);
  EXPECT_NEAR(s.tau.value, 4.0, 1e-12);
  // tested eagle2 nodes per cycle: 0.92 (acc), 0.02 (rej), 0.82 (acc), 0.72 (acc); the 0.62 node is untested
  // ECE = 1/4 (|0.92 - 1| + |0.02 - 0| + |0.82 - 1| + |0.72 - 1|) = 0.14
  const Calibration c = calibrate(f.runs[1]);
  EXPECT_EQ(c.tested, 64);
  EXPECT_NEAR(c.ece, 0.14, 1e-6);
  // EAGLE chain accepting 3, 1, 2, 0 of 5: 0-a 3/4, 1-a 2/3, 2-a 1/2, 3-a 0/1, 4-a none
  const std::vector<AlphaCount> a = n_alpha(f.runs[3]);
  EXPECT_EQ(f.runs[3].strategy, "eagle-chain");
  EXPECT_NEAR(a[0].alpha(), 0.75, 1e-12);
  EXPECT_NEAR(a[1].alpha(), 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(a[2].alpha(), 0.5, 1e-12);
  EXPECT_NEAR(a[3].alpha(), 0.0, 1e-12);
  EXPECT_EQ(a[4].tested, 0);
  EXPECT_NEAR(summarize_run(f, f.runs[3]).tau.value, 2.5, 1e-12);
  // static tree: P1 accepted when (k + q) % 4 != 0 for cycles k = 0..3: 3 of 4 in every question
  const PositionAcceptance pa = position_acceptance(f.runs[2]);
  ASSERT_EQ(pa.positions.size(), 6u);
  for (Eigen::Index q = 0; q < 4; ++q) EXPECT_DOUBLE_EQ(pa.rate(q, 0), 0.75);
  EXPECT_DOUBLE_EQ(pa.rate(0, 4), 0.0);  // P5 never accepted
}

TEST(PythonFixture, EveryExperimentHasATable) {
  for (const std::string& name : driver_names()) {
    const std::string path = fixture(name);
    REQUIRE_FIXTURE(path);
    const Report r = paper_tables(read_results(path), path);
    EXPECT_FALSE(r.tables.empty()) << name;
    EXPECT_FALSE(r.tables[0].rows.empty()) << name;
  }
}
