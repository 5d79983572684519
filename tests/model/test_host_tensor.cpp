// Host tensors: the argmax, top-k, softmax and range reads the decode loop does in place, held to libtorch's own
// ops (at::argmax, at::softmax, at::topk, min/max) on random rows, ties, -inf entries and NaNs, and for every
// vocabulary width around the 16-value blocks the top-k scan skips.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/base/error.h"
#include "core/model/host_tensor.h"

using namespace draftlab;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

at::Tensor random_rows(int64_t n, int64_t V, uint64_t seed, double scale = 3.0) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::normal(0.0, scale, {n, V}, gen, at::TensorOptions().dtype(at::kFloat));
}

// The reference: softmax then topk, ties broken by the lower index (what a stable sort gives).
void reference_top_k(const at::Tensor& row, int64_t k, std::vector<int64_t>& tokens, std::vector<float>& probs) {
  const auto p = at::softmax(row, -1);
  const auto order = std::get<1>(at::sort(row, /*stable=*/true, /*dim=*/-1, /*descending=*/true));
  tokens.assign(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + k);
  probs.clear();
  for (int64_t t : tokens) probs.push_back(p[t].item<float>());
}

void expect_top_k_matches_reference(const at::Tensor& rows, int64_t k) {
  const int64_t n = rows.size(0), V = rows.size(1);
  std::vector<int64_t> tokens(n * k);
  std::vector<float> probs(n * k);
  top_k_softmax(rows.data_ptr<float>(), n, V, k, tokens.data(), probs.data());
  for (int64_t j = 0; j < n; ++j) {
    std::vector<int64_t> want_tokens;
    std::vector<float> want_probs;
    reference_top_k(rows[j], k, want_tokens, want_probs);
    for (int64_t c = 0; c < k; ++c) {
      EXPECT_EQ(tokens[j * k + c], want_tokens[c]) << "V " << V << " k " << k << " row " << j << " rank " << c;
      EXPECT_NEAR(probs[j * k + c], want_probs[c], 1e-6f + 1e-5f * want_probs[c]) << "V " << V << " rank " << c;
    }
  }
}

TEST(HostTensor, ArgmaxIsLibtorchsOnRandomRowsTiesAndNaN) {
  for (int64_t V : {1, 2, 15, 16, 17, 33, 512, 1000}) {
    const auto rows = random_rows(4, V, 7 + V);
    for (int64_t j = 0; j < 4; ++j)
      EXPECT_EQ(argmax_of(rows[j]), rows[j].argmax().item<int64_t>()) << "V " << V << " row " << j;
  }
  // Ties: the first maximum. A NaN: the first NaN, wherever the maximum is.
  EXPECT_EQ(argmax_of(at::tensor(std::vector<float>{1, 5, 2, 5, 5})), 1);
  auto with_nan = at::tensor(std::vector<float>{1, 9, 2, NAN, 3, NAN});
  EXPECT_EQ(argmax_of(with_nan), with_nan.argmax().item<int64_t>());
  EXPECT_EQ(argmax_of(with_nan), 3);
  EXPECT_EQ(argmax_of(at::tensor(std::vector<float>{-kInf, -kInf, -3})), 2);
  // Other dtypes and shapes go through a float32 copy: float16 values are exact in float32.
  const auto half = random_rows(1, 300, 3).to(at::kHalf);
  EXPECT_EQ(argmax_of(half), half.argmax().item<int64_t>());
  const auto view = random_rows(3, 40, 5).narrow(1, 5, 20);  // not contiguous
  EXPECT_EQ(argmax_of(view), view.argmax().item<int64_t>());
}

TEST(HostTensor, TopKSoftmaxIsSoftmaxThenTopK) {
  for (int64_t V : {1, 3, 15, 16, 17, 31, 32, 33, 100, 512, 4099})
    for (int64_t k : {1, 2, 4, 10})
      if (k <= V) expect_top_k_matches_reference(random_rows(3, V, 100 * V + k), k);
  // Peaked rows (a confident head) and flat ones (a random head) stress the skipping and the insertion.
  expect_top_k_matches_reference(random_rows(2, 700, 11, 30.0), 10);
  expect_top_k_matches_reference(random_rows(2, 700, 12, 1e-3), 10);
}

TEST(HostTensor, TopKSoftmaxTiesAndMinusInfinity) {
  // Ties keep the lower index first; -inf entries (outside a reduced draft vocabulary) have probability 0 and come
  // last when k exceeds the finite ones.
  std::vector<float> row{2, -kInf, 5, 5, -kInf, 1, 5, -kInf};
  const int64_t V = static_cast<int64_t>(row.size()), k = 6;
  std::vector<int64_t> tokens(k);
  std::vector<float> probs(k);
  top_k_softmax(row.data(), 1, V, k, tokens.data(), probs.data());
  EXPECT_EQ(tokens, (std::vector<int64_t>{2, 3, 6, 0, 5, 1}));
  const auto p = at::softmax(at::tensor(row), 0);
  for (int64_t c = 0; c < k; ++c) EXPECT_NEAR(probs[c], p[tokens[c]].item<float>(), 1e-6f) << "rank " << c;
  EXPECT_EQ(probs[5], 0.0f);
  EXPECT_THROW(top_k_softmax(row.data(), 1, V, V + 1, tokens.data(), probs.data()), Error);
}

TEST(HostTensor, SoftmaxProbabilityAndMinMax) {
  const auto row = random_rows(1, 77, 21)[0];
  const auto p = at::softmax(row, 0);
  for (int64_t t : {0, 13, 76}) EXPECT_NEAR(softmax_probability(row, t), p[t].item<float>(), 1e-6f) << "token " << t;
  EXPECT_THROW(softmax_probability(row, 77), Error);
  const auto ids = at::tensor(std::vector<int64_t>{4, -2, 9, 0});
  EXPECT_EQ(min_max_of(ids), (std::pair<int64_t, int64_t>{-2, 9}));
  EXPECT_EQ(min_max_of(ids.to(at::kInt)), (std::pair<int64_t, int64_t>{-2, 9}));  // converted to int64 first
  EXPECT_THROW(min_max_of(at::empty({0}, at::kLong)), Error);
}

}  // namespace
