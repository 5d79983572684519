// Calibration of the draft's confidence (EAGLE-2 Figure 6): nodes binned by confidence, the acceptance rate per
// bin against the bin's mean confidence, and the expected calibration error.
//
// Only tested nodes (parent accepted or root, see run_tables.h) measure acceptance: a node under a rejected
// parent was never compared with the target. Bins, means and ECE are over tested nodes; `drafted` also counts
// the untested ones. Nodes without a confidence (NaN, e.g. pld) are skipped.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/results/results_file.h"

namespace draftlab::analysis {

struct CalibrationBin {
  double lower = 0, upper = 0;  // [lower, upper); the last bin includes 1
  int64_t drafted = 0;          // nodes with a confidence in the bin
  int64_t tested = 0;           // of those, nodes whose parent was accepted
  int64_t accepted = 0;         // of the tested, accepted
  double mean_confidence = 0;   // over tested nodes; NaN when tested == 0
  double acceptance_rate = 0;   // accepted / tested; NaN when tested == 0
};

struct Calibration {
  std::vector<CalibrationBin> bins;  // 1 / bin_width bins covering [0, 1]
  int64_t tested = 0;
  int64_t accepted = 0;
  double ece = 0;  // sum over bins of tested/N * |mean confidence - acceptance rate|; NaN when N == 0
};

// The bin of a confidence in [0, 1] (values outside are clamped; the last bin takes 1.0).
int calibration_bin(double confidence, int bins);

// All nodes of the runs with depth == `depth` (0 = every depth).
Calibration calibrate(const std::vector<const RunRecord*>& runs, int depth = 0, double bin_width = 0.05);
inline Calibration calibrate(const RunRecord& run, int depth = 0, double bin_width = 0.05) {
  return calibrate(std::vector<const RunRecord*>{&run}, depth, bin_width);
}

// One Calibration per depth present among the runs' nodes.
std::map<int, Calibration> calibrate_by_depth(const std::vector<const RunRecord*>& runs, double bin_width = 0.05);

}  // namespace draftlab::analysis
