// Pearson's chi-square goodness of fit, for the T > 0 losslessness tests: observed counts of outcomes against the
// exact probabilities the target gives them.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace draftlab::testing {

// The regularized upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a): the series for x < a + 1, else
// Lentz's continued fraction (Numerical Recipes 6.2), to double precision.
inline double upper_incomplete_gamma(double a, double x) {
  if (x <= 0) return 1.0;
  const double log_prefix = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000 && std::abs(term) > std::abs(sum) * 1e-17; ++n) sum += term *= x / (a + n);
    return std::max(0.0, 1.0 - sum * std::exp(log_prefix));
  }
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1 / d;
    const double step = d * c;
    h *= step;
    if (std::abs(step - 1) < 1e-16) break;
  }
  return std::exp(log_prefix) * h;
}

// P(chi-square with dof degrees of freedom > x).
inline double chi_square_tail(int dof, double x) { return upper_incomplete_gamma(dof / 2.0, x / 2.0); }

// The exact (to 1e-10 relative) x with P(chi-square(dof) > x) = alpha, by bisection on the tail.
inline double chi_square_quantile(int dof, double alpha) {
  double lo = 0, hi = dof + 10.0;
  while (chi_square_tail(dof, hi) > alpha) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-10 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (chi_square_tail(dof, mid) > alpha ? lo : hi) = mid;
  }
  return hi;
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
