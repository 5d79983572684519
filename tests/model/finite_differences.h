// The gradient check every trainer test uses: autograd's gradient of a float64 loss against central differences,
// at three random elements of every parameter.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace draftlab::testing {

// h = 1e-6 against autograd to ~1e-8 relative in float64; the tolerance (1e-7 absolute + 1e-5 relative) leaves
// room for the loss's rounding but catches any wrong or missing gradient term, small ones included. Indexing, not
// view(-1): projection parameters may be column-major views. Returns the number of elements checked.
inline int expect_gradients_match_central_differences(const std::vector<std::pair<std::string, at::Tensor>>& params,
                                                      const std::function<at::Tensor()>& loss) {
  for (const auto& [name, p] : params) p.requires_grad_(true);
  auto l = loss();
  EXPECT_EQ(l.scalar_type(), at::kDouble);
  l.backward();
  at::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  int checked = 0;
  for (const auto& [name, p] : params) {
    for (int k = 0; k < 3; ++k) {
      const int64_t i = at::randint(p.numel(), {1}, gen, at::TensorOptions().dtype(at::kLong)).item<int64_t>();
      auto elem = p.dim() == 2 ? p[i / p.size(1)][i % p.size(1)] : p[i];
      const double x0 = elem.item<double>(), h = 1e-6;
      elem.fill_(x0 + h);
      const double up = loss().item<double>();
      elem.fill_(x0 - h);
      const double down = loss().item<double>();
      elem.fill_(x0);
      const double numeric = (up - down) / (2 * h);
      const auto g = p.grad();
      const double analytic = (p.dim() == 2 ? g[i / p.size(1)][i % p.size(1)] : g[i]).item<double>();
      EXPECT_NEAR(analytic, numeric, 1e-7 + 1e-5 * std::abs(numeric)) << name << " element " << i;
      ++checked;
    }
  }
  for (const auto& [name, p] : params) p.mutable_grad() = at::Tensor();
  return checked;
}

}  // namespace draftlab::testing
