// Checks every PackedMatrix kernel test shares.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/ops/packed_matrix.h"

namespace draftlab::testing {

// y[j] computed with n rows equals y[j] computed alone, for n across every chunking: tree verification repeats
// vanilla's arithmetic. m: any matrix of 96 inputs.
inline void expect_rows_independent(const PackedMatrix& m, KernelIsa isa) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t out = m.out(), in = m.in();
  std::vector<float> x(static_cast<size_t>(64 * in));
  for (auto& v : x) v = dist(rng);
  std::vector<float> alone(static_cast<size_t>(64 * out));
  for (int64_t j = 0; j < 64; ++j) m.multiply(x.data() + j * in, in, 1, alone.data() + j * out, out, 0, m.panels(), isa);
  for (int64_t n : {2, 3, 5, 8, 9, 13, 16, 31, 64}) {
    std::vector<float> together(static_cast<size_t>(n * out));
    m.multiply(x.data(), in, n, together.data(), out, 0, m.panels(), isa);
    ASSERT_EQ(0, std::memcmp(together.data(), alone.data(), together.size() * sizeof(float))) << "n = " << n;
  }
}

// A random [out, in] matrix, row-major, values in [-1, 1).
inline std::vector<float> random_matrix(int64_t out, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(out * in));
  for (auto& v : w) v = dist(rng);
  return w;
}

}  // namespace draftlab::testing
