// Calibration bins and ECE against a hand-computed tree (numbers worked out in the comments, not by the code).
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/calibration.h"
#include "run_builder.h"
#include "test_errors.h"

using namespace draftlab;
using namespace draftlab::analysis;
using draftlab::testing::make_run;

namespace {

// One cycle:            tree_index: depth parent conf   accepted   tested?
//   1: 1 0 0.92 1  tested (root child)            -> bin 18 [0.90, 0.95)
//   2: 1 0 0.93 0  tested                          -> bin 18
//   3: 2 1 0.41 1  tested (parent 1 accepted)      -> bin 8  [0.40, 0.45)
//   4: 2 2 0.43 0  NOT tested (parent 2 rejected)  -> bin 8, drafted only
//   5: 3 3 0.02 0  tested (parent 3 accepted)      -> bin 0
//   6: 2 1 0.44 0  tested                          -> bin 8
//   7: 1 0 NaN  1  no confidence: skipped everywhere
RunRecord hand_run() {
  return make_run("eagle2", "eagle2", "alpaca", 0.0,
                  {{1, 0, 1.0,
                    {{{1, 1, 0, 0, 0.92f, 1}, {1, 2, 0, 1, 0.93f, 0}, {2, 3, 1, 0, 0.41f, 1},
                      {2, 4, 2, 0, 0.43f, 0}, {3, 5, 3, 0, 0.02f, 0}, {2, 6, 1, 1, 0.44f, 0},
                      {1, 7, 0, 2, NAN, 1}}}}});
}

}  // namespace

TEST(Calibration, BinsCountsRatesAndEceByHand) {
  const RunRecord run = hand_run();
  const Calibration c = calibrate(run);
  ASSERT_EQ(c.bins.size(), 20u);
  EXPECT_NEAR(c.bins[8].lower, 0.40, 1e-12);
  EXPECT_NEAR(c.bins[8].upper, 0.45, 1e-12);
  // bin 18: nodes 1, 2 -> 2 tested, 1 accepted, mean confidence 0.925
  EXPECT_EQ(c.bins[18].drafted, 2);
  EXPECT_EQ(c.bins[18].tested, 2);
  EXPECT_EQ(c.bins[18].accepted, 1);
  EXPECT_NEAR(c.bins[18].acceptance_rate, 0.5, 1e-12);
  EXPECT_NEAR(c.bins[18].mean_confidence, 0.925, 1e-6);
  // bin 8: nodes 3, 4, 6 drafted; 3 and 6 tested; 1 accepted; mean (0.41 + 0.44) / 2
  EXPECT_EQ(c.bins[8].drafted, 3);
  EXPECT_EQ(c.bins[8].tested, 2);
  EXPECT_EQ(c.bins[8].accepted, 1);
  EXPECT_NEAR(c.bins[8].mean_confidence, 0.425, 1e-6);
  // bin 0: node 5
  EXPECT_EQ(c.bins[0].tested, 1);
  EXPECT_NEAR(c.bins[0].acceptance_rate, 0.0, 1e-12);
  // empty bins have NaN rates and no counts
  EXPECT_EQ(c.bins[10].drafted, 0);
  EXPECT_TRUE(std::isnan(c.bins[10].acceptance_rate));
  EXPECT_EQ(c.tested, 5);
  EXPECT_EQ(c.accepted, 2);
  // ECE = 2/5 |0.925 - 0.5| + 2/5 |0.425 - 0.5| + 1/5 |0.02 - 0| = 0.17 + 0.03 + 0.004
  EXPECT_NEAR(c.ece, 0.204, 1e-6);
}

TEST(Calibration, PerDepthByHand) {
  const RunRecord run = hand_run();
  const auto by_depth = calibrate_by_depth({&run});
  ASSERT_EQ(by_depth.size(), 3u);  // depths 1, 2, 3 (the NaN node adds none)
  EXPECT_EQ(by_depth.at(1).tested, 2);
  EXPECT_NEAR(by_depth.at(1).ece, 0.425, 1e-6);  // one bin: |0.925 - 0.5|
  EXPECT_EQ(by_depth.at(2).tested, 2);
  EXPECT_NEAR(by_depth.at(2).ece, 0.075, 1e-6);  // |0.425 - 0.5|
  EXPECT_NEAR(by_depth.at(3).ece, 0.02, 1e-6);
}

TEST(Calibration, BinEdges) {
  EXPECT_EQ(calibration_bin(0.0, 20), 0);
  EXPECT_EQ(calibration_bin(0.049, 20), 0);
  EXPECT_EQ(calibration_bin(0.051, 20), 1);
  EXPECT_EQ(calibration_bin(0.5, 20), 10);  // exact in binary: [0.50, 0.55)
  EXPECT_EQ(calibration_bin(0.999, 20), 19);
  EXPECT_EQ(calibration_bin(1.0, 20), 19);  // the last bin is closed
  EXPECT_EQ(calibration_bin(1.5, 20), 19);
  EXPECT_EQ(calibration_bin(-0.1, 20), 0);
}

TEST(Calibration, PerfectlyCalibratedHasZeroEce) {
  // 4 tested root children in bin [0.50, 0.55) with confidence 0.5 exactly: 2 accepted -> rate 0.5 = confidence.
  const RunRecord run = make_run("x", "eagle2", "d", 0.0,
                                 {{1, 0, 1.0, {{{1, 1, 0, 0, 0.5f, 1}}, {{1, 1, 0, 0, 0.5f, 0}},
                                               {{1, 1, 0, 0, 0.5f, 1}}, {{1, 1, 0, 0, 0.5f, 0}}}}});
  EXPECT_NEAR(calibrate(run).ece, 0.0, 1e-12);
}

TEST(Calibration, EmptyRunHasNaNEce) {
  const RunRecord run = make_run("x", "pld", "d", 0.0, {{1, 0, 1.0, {{{1, 1, 0, 0, NAN, 1}}}}});
  const Calibration c = calibrate(run);
  EXPECT_EQ(c.tested, 0);
  EXPECT_TRUE(std::isnan(c.ece));
}

TEST(Calibration, ParentMissingFromCycleIsAnError) {
  RunRecord run = hand_run();
  run.nodes.parent[2] = 9;  // node 3 points at a tree index that is not in its cycle
  draftlab::testing::expect_error([&] { calibrate(run); }, {"eagle2", "alpaca", "nodes/parent", "9"});
}
