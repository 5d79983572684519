#include "analysis/calibration.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "analysis/run_tables.h"
#include "core/base/error.h"

namespace draftlab::analysis {

int calibration_bin(double confidence, int bins) {
  const int b = static_cast<int>(std::floor(confidence * bins));
  return std::clamp(b, 0, bins - 1);
}

Calibration calibrate(const std::vector<const RunRecord*>& runs, int depth, double bin_width) {
  check(bin_width > 0 && bin_width <= 1, "calibration: bin width must be in (0, 1]");
  const int nbins = static_cast<int>(std::lround(1.0 / bin_width));
  // Per-bin sums; Eigen keeps the ECE arithmetic a few vector expressions.
  Eigen::ArrayXd drafted = Eigen::ArrayXd::Zero(nbins), tested = Eigen::ArrayXd::Zero(nbins),
                 accepted = Eigen::ArrayXd::Zero(nbins), confidence_sum = Eigen::ArrayXd::Zero(nbins);
  for (const RunRecord* run : runs) {
    const std::vector<int8_t> was_tested = parent_accepted(*run);
    const NodeRows& nodes = run->nodes;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const double c = nodes.confidence[i];
      if (std::isnan(c) || (depth != 0 && nodes.depth[i] != depth)) continue;
      const int b = calibration_bin(c, nbins);
      drafted[b] += 1;
      if (!was_tested[i]) continue;
      tested[b] += 1;
      accepted[b] += nodes.accepted[i] ? 1 : 0;
      confidence_sum[b] += c;
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Eigen::ArrayXd mean_conf = (tested > 0).select(confidence_sum / tested.max(1.0), nan);
  const Eigen::ArrayXd rate = (tested > 0).select(accepted / tested.max(1.0), nan);
  Calibration out;
  out.tested = static_cast<int64_t>(tested.sum());
  out.accepted = static_cast<int64_t>(accepted.sum());
  out.ece = out.tested == 0 ? nan
                            : ((tested > 0).select(tested * (mean_conf - rate).abs(), 0.0)).sum() / tested.sum();
  for (int b = 0; b < nbins; ++b) {
    CalibrationBin bin;
    bin.lower = b * bin_width;
    bin.upper = (b + 1) * bin_width;
    bin.drafted = static_cast<int64_t>(drafted[b]);
    bin.tested = static_cast<int64_t>(tested[b]);
    bin.accepted = static_cast<int64_t>(accepted[b]);
    bin.mean_confidence = mean_conf[b];
    bin.acceptance_rate = rate[b];
    out.bins.push_back(bin);
  }
  return out;
}

std::map<int, Calibration> calibrate_by_depth(const std::vector<const RunRecord*>& runs, double bin_width) {
  std::set<int> depths;
  for (const RunRecord* run : runs)
    for (size_t i = 0; i < run->nodes.size(); ++i)
      if (!std::isnan(run->nodes.confidence[i])) depths.insert(run->nodes.depth[i]);
  std::map<int, Calibration> out;
  for (int d : depths) out[d] = calibrate(runs, d, bin_width);
  return out;
}

}  // namespace draftlab::analysis
