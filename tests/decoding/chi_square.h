// Pearson's chi-square goodness of fit, for the T > 0 losslessness tests: observed counts of outcomes against the
// exact probabilities the target gives them.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace draftlab::testing {

// Wilson-Hilferty approximation of the chi-square quantile for `dof` degrees of freedom at normal quantile z
// (z = 4.75: a false-alarm rate of about 1e-6).
inline double chi_square_quantile(int dof, double z) {
  const double k = dof, a = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

struct ChiSquare {
  double statistic = 0;
  int dof = 0;
  double impossible = 0;  // observations of outcomes with probability 0: each one alone is a failure
};

// probs[i]: the exact probability of outcome i; counts[i]: how often it was seen in n trials. Cells expected fewer
// than 5 times are pooled, as the approximation needs.
inline ChiSquare chi_square(const std::vector<double>& probs, const std::vector<int64_t>& counts, int64_t n) {
  ChiSquare r;
  double small_expected = 0, small_observed = 0;
  int cells = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const double expected = probs[i] * static_cast<double>(n);
    const double observed = static_cast<double>(counts[i]);
    if (probs[i] <= 0) {
      r.impossible += observed;
      continue;
    }
    if (expected < 5) {
      small_expected += expected;
      small_observed += observed;
      continue;
    }
    r.statistic += (observed - expected) * (observed - expected) / expected;
    ++cells;
  }
  if (small_expected > 0) {
    r.statistic += (small_observed - small_expected) * (small_observed - small_expected) / small_expected;
    ++cells;
  }
  r.dof = std::max(1, cells - 1);
  return r;
}

}  // namespace draftlab::testing
