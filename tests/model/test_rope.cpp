// RoPE frequency tables against hand-computed values, including Llama 3.1's "llama3" rescaling.
#include <gtest/gtest.h>

#include <cmath>

#include "core/model/rope.h"

using namespace draftlab;

TEST(Rope, PlainInverseFrequencies) {
  ModelConfig c;
  c.head_dim = 8;
  c.rope_theta = 10000;
  auto inv = RotaryEmbedding::inverse_frequencies(c);
  ASSERT_EQ(inv.size(), 4u);
  EXPECT_DOUBLE_EQ(inv[0], 1.0);
  EXPECT_NEAR(inv[1], 0.1, 1e-12);    // 10000^(-2/8)
  EXPECT_NEAR(inv[2], 0.01, 1e-12);
  EXPECT_NEAR(inv[3], 0.001, 1e-12);
}

TEST(Rope, Llama3ScalingBands) {
  // Llama 3.1 8B: theta 500000, head_dim 128, factor 8, low 1, high 4, original context 8192.
  ModelConfig c;
  c.head_dim = 128;
  c.rope_theta = 500000;
  c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 8192};
  auto inv = RotaryEmbedding::inverse_frequencies(c);
  // j = 0: wavelength 2 pi < 2048, unchanged.
  EXPECT_DOUBLE_EQ(inv[0], 1.0);
  // j = 63: 500000^(-126/128) = 2.4551e-6, wavelength 2.56e6 > 8192: divided by 8.
  EXPECT_NEAR(inv[63], std::pow(500000.0, -126.0 / 128.0) / 8.0, 1e-15);
  EXPECT_NEAR(inv[63], 3.0689e-7, 1e-10);
  // j = 32: 500000^(-1/2) = 1.41421e-3, wavelength 4442.9 lies in the band:
  // smooth = (8192 / 4442.88 - 1) / 3 = 0.28128; f = (1 - smooth) f / 8 + smooth f = 5.2484e-4 (by hand).
  EXPECT_NEAR(inv[32], 5.2484e-4, 1e-8);
}

TEST(Rope, RotationPreservesNormAndMatchesComplexMultiply) {
  // Halves convention: (x_j, x_{j+h}) rotates by angle p * inv[j], like the complex product.
  auto x = at::tensor(std::vector<float>{1, 2, 3, 4}).view({1, 1, 4});
  const double a0 = 5 * 1.0, a1 = 5 * 0.01;  // head_dim 4, theta 10000: inv = {1, 0.01}, position 5
  auto cos = at::tensor(std::vector<float>{(float)std::cos(a0), (float)std::cos(a1)}).view({1, 1, 2});
  auto sin = at::tensor(std::vector<float>{(float)std::sin(a0), (float)std::sin(a1)}).view({1, 1, 2});
  auto y = RotaryEmbedding::apply(x, cos, sin).view({4});
  EXPECT_NEAR(y[0].item<double>(), 1 * std::cos(a0) - 3 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[2].item<double>(), 3 * std::cos(a0) + 1 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[1].item<double>(), 2 * std::cos(a1) - 4 * std::sin(a1), 1e-6);
  EXPECT_NEAR(y[3].item<double>(), 4 * std::cos(a1) + 2 * std::sin(a1), 1e-6);
}
