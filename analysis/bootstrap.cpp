#include "analysis/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "core/base/error.h"

namespace draftlab::analysis {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}

double sorted_quantile(const Eigen::VectorXd& sorted, double q) {
  const Eigen::Index n = sorted.size();
  if (n == 0) return kNaN;
  const double h = q * static_cast<double>(n - 1);
  const Eigen::Index lo = static_cast<Eigen::Index>(std::floor(h));
  const Eigen::Index hi = std::min<Eigen::Index>(lo + 1, n - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Estimate bootstrap_ratio(const Eigen::VectorXd& numerator, const Eigen::VectorXd& denominator,
                         const BootstrapOptions& options) {
  check(numerator.size() == denominator.size(), "bootstrap_ratio: numerator and denominator differ in length");
  check(options.resamples >= 0, "bootstrap: resamples must be >= 0");
  check(options.level > 0 && options.level < 1, "bootstrap: level must be in (0, 1)");
  const Eigen::Index n = numerator.size();
  if (n == 0) return {kNaN, kNaN, kNaN};
  const double value = numerator.sum() / denominator.sum();
  if (n < 2 || options.resamples == 0) return {value, kNaN, kNaN};

  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<Eigen::Index> pick(0, n - 1);
  Eigen::VectorXd replicates(options.resamples);
  Eigen::Index kept = 0;
  for (int r = 0; r < options.resamples; ++r) {
    double num = 0, den = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
      const Eigen::Index j = pick(rng);
      num += numerator[j];
      den += denominator[j];
    }
    const double ratio = num / den;
    if (std::isfinite(ratio)) replicates[kept++] = ratio;  // a replicate with a zero denominator says nothing
  }
  if (kept < 2) return {value, kNaN, kNaN};
  Eigen::VectorXd sorted = replicates.head(kept);
  std::sort(sorted.data(), sorted.data() + kept);
  const double tail = (1.0 - options.level) / 2.0;
  return {value, sorted_quantile(sorted, tail), sorted_quantile(sorted, 1.0 - tail)};
}

Estimate bootstrap_mean(const Eigen::VectorXd& x, const BootstrapOptions& options) {
  return bootstrap_ratio(x, Eigen::VectorXd::Ones(x.size()), options);
}

}  // namespace draftlab::analysis
