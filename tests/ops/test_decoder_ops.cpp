// The native decoder-layer pieces against naive double-precision references, on every kernel path this CPU runs,
// and the property lossless verification rests on: a tree row's attention over its prefix and ancestors (with
// masked siblings in between) is bit-identical to the same row over the compacted cache vanilla decoding sees.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/ops/decoder_ops.h"

namespace draftlab {
namespace {

std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

struct Cache {
  int64_t kv_heads, rows, hd;
  std::vector<float> k, v;
  int64_t head_stride() const { return rows * hd; }
};

Cache random_cache(int64_t kv_heads, int64_t rows, int64_t hd, std::mt19937& rng) {
  return {kv_heads, rows, hd, random_vector(kv_heads * rows * hd, rng, 2.0f), random_vector(kv_heads * rows * hd, rng)};
}

// Naive attention of one query row over the visible cache rows, in double.
std::vector<double> naive_attention(const float* q, const Cache& c, int64_t heads, const std::vector<bool>& visible) {
  const int64_t hd = c.hd, group = heads / c.kv_heads;
  std::vector<double> out(heads * hd, 0.0);
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t g = h / group;
    std::vector<double> s(c.rows, -INFINITY);
    double m = -INFINITY;
    for (int64_t t = 0; t < c.rows; ++t) {
      if (!visible[t]) continue;
      double dot = 0;
      for (int64_t i = 0; i < hd; ++i) dot += static_cast<double>(q[h * hd + i]) * c.k[g * c.head_stride() + t * hd + i];
      s[t] = dot / std::sqrt(static_cast<double>(hd));
      m = std::max(m, s[t]);
    }
    double sum = 0;
    for (int64_t t = 0; t < c.rows; ++t)
      if (visible[t]) sum += std::exp(s[t] - m);
    for (int64_t t = 0; t < c.rows; ++t) {
      if (!visible[t]) continue;
      const double p = std::exp(s[t] - m) / sum;
      for (int64_t i = 0; i < hd; ++i) out[h * hd + i] += p * c.v[g * c.head_stride() + t * hd + i];
    }
  }
  return out;
}

class DecoderOpsTest : public ::testing::TestWithParam<KernelIsa> {
 protected:
  void SetUp() override {
    if (static_cast<int>(GetParam()) > static_cast<int>(best_kernel_isa())) GTEST_SKIP() << "CPU lacks this ISA";
  }
};

TEST_P(DecoderOpsTest, AttentionMatchesNaiveUnderTreeAndCausalMasks) {
  for (int64_t hd : {24, 64}) {  // 64: the vectorised path for head dims that are multiples of 16
  SCOPED_TRACE("head_dim " + std::to_string(hd));
  std::mt19937 rng(11);
  const int64_t heads = 6, kv_heads = 2, T = 37, n = 5;
  const Cache c = random_cache(kv_heads, T, hd, rng);
  const auto q = random_vector(n * heads * hd, rng);
  const AttentionShape shape{heads, kv_heads, hd, c.head_stride(), 1.0f / std::sqrt(static_cast<float>(hd))};
  std::vector<float> scratch(T), out(n * heads * hd);
  // Tree mask: prefix visible, new rows see a random subset of the earlier new rows (and themselves).
  std::vector<uint8_t> vis(n * T, 1);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t t = T - n; t < T; ++t) vis[j * T + t] = (t - (T - n) == j) || (t - (T - n) < j && rng() % 2);
  attention_rows(q.data(), heads * hd, n, c.k.data(), c.v.data(), T, vis.data(), T, shape, out.data(), heads * hd,
                 scratch.data(), GetParam());
  for (int64_t j = 0; j < n; ++j) {
    std::vector<bool> visible(T);
    for (int64_t t = 0; t < T; ++t) visible[t] = vis[j * T + t];
    const auto want = naive_attention(q.data() + j * heads * hd, c, heads, visible);
    for (int64_t i = 0; i < heads * hd; ++i) ASSERT_NEAR(out[j * heads * hd + i], want[i], 2e-6) << j << " " << i;
  }
  // Causal (no mask): row j sees [0, T - n + j].
  attention_rows(q.data(), heads * hd, n, c.k.data(), c.v.data(), T, nullptr, 0, shape, out.data(), heads * hd,
                 scratch.data(), GetParam());
  for (int64_t j = 0; j < n; ++j) {
    std::vector<bool> visible(T);
    for (int64_t t = 0; t < T; ++t) visible[t] = t <= T - n + j;
    const auto want = naive_attention(q.data() + j * heads * hd, c, heads, visible);
    for (int64_t i = 0; i < heads * hd; ++i) ASSERT_NEAR(out[j * heads * hd + i], want[i], 2e-6) << j << " " << i;
  }
  }
}

TEST_P(DecoderOpsTest, TreeRowEqualsTheCompactedChainBitForBit) {
  std::mt19937 rng(12);
  const int64_t heads = 4, kv_heads = 4, hd = 64, prefix = 29;
  const std::vector<int64_t> path = {0, 2, 3, 6};  // ancestors (and the node itself) among 8 tree rows
  const int64_t tree = 8, T = prefix + tree;
  const Cache c = random_cache(kv_heads, T, hd, rng);
  const auto q = random_vector(heads * hd, rng);
  const AttentionShape shape{heads, kv_heads, hd, c.head_stride(), 1.0f / std::sqrt(64.0f)};
  std::vector<float> scratch(T), in_tree(heads * hd), in_chain(heads * hd);
  std::vector<uint8_t> vis(T, 0);
  for (int64_t t = 0; t < prefix; ++t) vis[t] = 1;
  for (int64_t a : path) vis[prefix + a] = 1;
  attention_rows(q.data(), 0, 1, c.k.data(), c.v.data(), T, vis.data(), T, shape, in_tree.data(), 0, scratch.data(),
                 GetParam());
  // The compacted cache: prefix, then the path's rows packed in order; the row is the chain's last.
  const int64_t Tc = prefix + static_cast<int64_t>(path.size());
  Cache packed{kv_heads, Tc, hd, std::vector<float>(kv_heads * Tc * hd), std::vector<float>(kv_heads * Tc * hd)};
  for (int64_t g = 0; g < kv_heads; ++g) {
    for (int64_t t = 0; t < Tc; ++t) {
      const int64_t src = t < prefix ? t : prefix + path[t - prefix];
      std::memcpy(&packed.k[g * Tc * hd + t * hd], &c.k[g * T * hd + src * hd], hd * sizeof(float));
      std::memcpy(&packed.v[g * Tc * hd + t * hd], &c.v[g * T * hd + src * hd], hd * sizeof(float));
    }
  }
  const AttentionShape packed_shape{heads, kv_heads, hd, Tc * hd, shape.scale};
  attention_rows(q.data(), 0, 1, packed.k.data(), packed.v.data(), Tc, nullptr, 0, packed_shape, in_chain.data(), 0,
                 scratch.data(), GetParam());
  EXPECT_EQ(0, std::memcmp(in_tree.data(), in_chain.data(), in_tree.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Isa, DecoderOpsTest,
                         ::testing::Values(KernelIsa::Portable, KernelIsa::Avx2, KernelIsa::Avx512),
                         [](const auto& info) { return std::string(kernel_isa_name(info.param)); });

TEST(DecoderOps, ElementwiseOpsMatchNaive) {
  std::mt19937 rng(13);
  const int64_t n = 3, d = 40, heads = 5, hd = 8, I = 21;
  auto x = random_vector(n * d, rng, 3.0f);
  const auto w = random_vector(d, rng);
  std::vector<float> normed(n * d);
  rms_norm_rows(x.data(), d, n, d, w.data(), 1e-5, normed.data(), d);
  for (int64_t j = 0; j < n; ++j) {
    double ms = 0;
    for (int64_t i = 0; i < d; ++i) ms += static_cast<double>(x[j * d + i]) * x[j * d + i];
    const double inv = 1.0 / std::sqrt(ms / d + 1e-5);
    for (int64_t i = 0; i < d; ++i) ASSERT_NEAR(normed[j * d + i], x[j * d + i] * inv * w[i], 1e-5);
  }
  // RoPE (halves convention) at per-row angles.
  auto r = random_vector(n * heads * hd, rng);
  const auto original = r;
  std::vector<std::vector<float>> cos(n, std::vector<float>(hd / 2)), sin(cos);
  std::vector<const float*> cp(n), sp(n);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < hd / 2; ++i) {
      cos[j][i] = std::cos(0.3f * (j + 1) * (i + 1));
      sin[j][i] = std::sin(0.3f * (j + 1) * (i + 1));
    }
    cp[j] = cos[j].data();
    sp[j] = sin[j].data();
  }
  rope_rows(r.data(), heads * hd, n, heads, hd, cp.data(), sp.data());
  for (int64_t j = 0; j < n; ++j)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < hd / 2; ++i) {
        const float* o = &original[j * heads * hd + h * hd];
        const float a = o[i], b = o[i + hd / 2];
        ASSERT_NEAR(r[j * heads * hd + h * hd + i], a * cos[j][i] - b * sin[j][i], 1e-6);
        ASSERT_NEAR(r[j * heads * hd + h * hd + i + hd / 2], b * cos[j][i] + a * sin[j][i], 1e-6);
      }
  // SiLU(gate) * up, over a wide range of gates (both signs, large magnitudes).
  auto g = random_vector(n * 2 * I, rng, 30.0f);
  std::vector<float> act(n * I);
  silu_mul_rows(g.data(), 2 * I, n, I, act.data(), I);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < I; ++i) {
      const double a = g[j * 2 * I + i], up = g[j * 2 * I + I + i];
      const double want = a / (1.0 + std::exp(-a)) * up;
      ASSERT_NEAR(act[j * I + i], want, 1e-6 * std::fabs(want) + 1e-6);
    }
  std::vector<float> acc(n * d, 1.0f);
  add_rows(acc.data(), d, x.data(), d, n, d);
  for (int64_t i = 0; i < n * d; ++i) ASSERT_EQ(acc[i], 1.0f + x[i]);
}

}  // namespace
}  // namespace draftlab
