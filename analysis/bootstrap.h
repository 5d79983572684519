// Percentile bootstrap confidence intervals over questions (the unit the runs sample).
//
// Speedup and tau are ratios of sums (total vanilla time / total method time; accepted tokens / cycles), so the
// resampling draws whole questions with replacement and recomputes the ratio of the resampled sums: a question
// with many cycles weighs as much in a replicate as it does in the estimate.
#pragma once

#include <Eigen/Core>

#include <cstdint>

namespace draftlab::analysis {

struct BootstrapOptions {
  int resamples = 1000;     // 0: the value alone, no interval (what a summary that prints none needs)
  double level = 0.95;      // central interval: [(1 - level) / 2, (1 + level) / 2] quantiles of the replicates
  uint64_t seed = 20240601;  // fixed: the same file gives the same interval every time
};

// An estimate with its interval; low/high are NaN when no interval was computed (fewer than 2 samples).
struct Estimate {
  double value;
  double low;
  double high;
  bool has_interval() const { return low == low && high == high; }
};

// sum(numerator) / sum(denominator) and its percentile interval, resampling indices i jointly (paired).
// numerator and denominator have one entry per sampling unit. Empty input gives NaN everywhere.
Estimate bootstrap_ratio(const Eigen::VectorXd& numerator, const Eigen::VectorXd& denominator,
                         const BootstrapOptions& options = {});

// mean(x) and its percentile interval.
Estimate bootstrap_mean(const Eigen::VectorXd& x, const BootstrapOptions& options = {});

// The q-quantile (0 <= q <= 1) of sorted values by linear interpolation between order statistics (type 7).
double sorted_quantile(const Eigen::VectorXd& sorted, double q);

}  // namespace draftlab::analysis
