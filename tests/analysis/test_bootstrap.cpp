// Percentile bootstrap: quantiles by hand, coverage of a known mean, intervals shrinking like 1/sqrt(n).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "analysis/bootstrap.h"
#include "core/base/error.h"

using namespace draftlab::analysis;

TEST(Bootstrap, SortedQuantileByHand) {
  Eigen::VectorXd v(4);
  v << 1, 2, 3, 4;
  EXPECT_DOUBLE_EQ(sorted_quantile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(sorted_quantile(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(sorted_quantile(v, 0.5), 2.5);   // halfway between 2 and 3
  EXPECT_DOUBLE_EQ(sorted_quantile(v, 0.25), 1.75);  // h = 0.75
}

TEST(Bootstrap, RatioOfSumsNotMeanOfRatios) {
  Eigen::VectorXd num(2), den(2);
  num << 1, 9;
  den << 1, 3;
  // sum ratio 10 / 4 = 2.5 (the mean of ratios would be 2)
  EXPECT_DOUBLE_EQ(bootstrap_ratio(num, den).value, 2.5);
}

TEST(Bootstrap, SeededAndDegenerateCases) {
  Eigen::VectorXd x(12);
  x << 1, 2, 3, 4, 10, 2.5, 7.25, 1.125, 3.5, 8.75, 0.5, 6.0;  // continuous enough that the seed shows
  const Estimate a = bootstrap_mean(x), b = bootstrap_mean(x);
  EXPECT_EQ(a.low, b.low);
  EXPECT_EQ(a.high, b.high);
  BootstrapOptions other;
  other.seed = 99;
  EXPECT_NE(bootstrap_mean(x, other).low, a.low);  // the seed matters
  EXPECT_LT(a.low, a.value);
  EXPECT_GT(a.high, a.value);
  EXPECT_GE(a.low, 0.5);  // a mean of resampled values lies within their range
  EXPECT_LE(a.high, 10.0);
  EXPECT_FALSE(bootstrap_mean(Eigen::VectorXd::Constant(1, 3.0)).has_interval());
  EXPECT_TRUE(std::isnan(bootstrap_mean(Eigen::VectorXd()).value));
  // constant data: a zero-width interval at the value
  const Estimate c = bootstrap_mean(Eigen::VectorXd::Constant(10, 3.0));
  EXPECT_DOUBLE_EQ(c.low, 3.0);
  EXPECT_DOUBLE_EQ(c.high, 3.0);
  // resamples = 0: the same value, no interval; negative counts are refused
  BootstrapOptions none;
  none.resamples = 0;
  const Estimate v = bootstrap_mean(x, none);
  EXPECT_EQ(v.value, a.value);
  EXPECT_FALSE(v.has_interval());
  none.resamples = -1;
  EXPECT_THROW(bootstrap_mean(x, none), draftlab::Error);
}

TEST(Bootstrap, CoversTheTrueMeanAtAboutTheNominalRate) {
  // 60 independent samples of 100 draws from an exponential with mean 2: a 90% interval should contain 2 in
  // roughly 90% of them (the percentile bootstrap undercovers a little on skewed data; binomial sd ~ 4%).
  std::mt19937_64 rng(12345);
  std::exponential_distribution<double> draw(0.5);
  BootstrapOptions options;
  options.level = 0.90;
  options.resamples = 400;
  int covered = 0;
  const int trials = 60;
  for (int t = 0; t < trials; ++t) {
    Eigen::VectorXd x(100);
    for (Eigen::Index i = 0; i < x.size(); ++i) x[i] = draw(rng);
    options.seed = 1000 + t;
    const Estimate e = bootstrap_mean(x, options);
    covered += (e.low <= 2.0 && 2.0 <= e.high) ? 1 : 0;
  }
  EXPECT_GE(covered, 45);  // >= 75%
  EXPECT_LE(covered, 60);
}

TEST(Bootstrap, IntervalShrinksLikeOneOverSqrtN) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> draw(5.0, 1.0);
  auto width = [&](int n) {
    Eigen::VectorXd x(n);
    for (int i = 0; i < n; ++i) x[i] = draw(rng);
    const Estimate e = bootstrap_mean(x);
    return e.high - e.low;
  };
  const double w100 = width(100), w1600 = width(1600);
  // Expected widths 2 * 1.96 / sqrt(n): 0.39 and 0.098, ratio 1/4.
  EXPECT_NEAR(w100, 0.392, 0.08);
  EXPECT_NEAR(w1600, 0.098, 0.02);
  EXPECT_LT(w1600, 0.4 * w100);
}
