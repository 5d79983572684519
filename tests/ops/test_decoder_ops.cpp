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

// A KV cache in float32 (k, v) and, for the float16 cache, the same values as float16 bits (k16, v16): a float16
// cache's k and v hold the values rounded to float16, so the naive reference sees what the kernel reads.
struct Cache {
  int64_t kv_heads, rows, hd;
  std::vector<float> k, v;
  bool float16 = false;
  std::vector<uint16_t> k16, v16;
  int64_t head_stride() const { return rows * hd; }
  const void* keys() const { return float16 ? static_cast<const void*>(k16.data()) : k.data(); }
  const void* values() const { return float16 ? static_cast<const void*>(v16.data()) : v.data(); }
  void store_as_float16() {
    float16 = true;
    for (auto [values, bits] : {std::make_pair(&k, &k16), std::make_pair(&v, &v16)}) {
      bits->resize(values->size());
      float_to_half_rows(values->data(), static_cast<int64_t>(values->size()), bits->data());
      for (size_t i = 0; i < values->size(); ++i) (*values)[i] = half_to_float((*bits)[i]);
    }
  }
};

Cache random_cache(int64_t kv_heads, int64_t rows, int64_t hd, std::mt19937& rng, bool float16 = false) {
  Cache c{kv_heads, rows, hd, random_vector(kv_heads * rows * hd, rng, 2.0f), random_vector(kv_heads * rows * hd, rng),
          false, {}, {}};
  if (float16) c.store_as_float16();
  return c;
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

// Attention on every kernel path, over a float32 and a float16 KV cache.
class DecoderOpsTest : public ::testing::TestWithParam<std::tuple<KernelIsa, bool>> {
 protected:
  void SetUp() override {
    if (static_cast<int>(isa()) > static_cast<int>(best_kernel_isa())) GTEST_SKIP() << "CPU lacks this ISA";
  }
  KernelIsa isa() const { return std::get<0>(GetParam()); }
  bool float16_cache() const { return std::get<1>(GetParam()); }
  AttentionShape shape(int64_t heads, const Cache& c) const {
    AttentionShape s{heads, c.kv_heads, c.hd, c.head_stride(), 1.0f / std::sqrt(static_cast<float>(c.hd))};
    s.kv_float16 = c.float16;
    return s;
  }
};

TEST_P(DecoderOpsTest, AttentionMatchesNaiveUnderTreeAndCausalMasks) {
  for (int64_t hd : {24, 16, 32, 64, 128}) {  // 16..128: the shared-cache pass; 24: the generic body
  SCOPED_TRACE("head_dim " + std::to_string(hd));
  std::mt19937 rng(11);
  const int64_t heads = 6, kv_heads = 2, T = 37, n = 5;
  const Cache c = random_cache(kv_heads, T, hd, rng, float16_cache());
  const auto q = random_vector(n * heads * hd, rng);
  const AttentionShape shape = this->shape(heads, c);
  std::vector<float> scratch(attention_scratch_floats(T)), out(n * heads * hd);
  // Tree mask: prefix visible, new rows see a random subset of the earlier new rows (and themselves).
  std::vector<uint8_t> vis(n * T, 1);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t t = T - n; t < T; ++t) vis[j * T + t] = (t - (T - n) == j) || (t - (T - n) < j && rng() % 2);
  attention_rows(q.data(), heads * hd, n, c.keys(), c.values(), T, vis.data(), T, shape, out.data(), heads * hd,
                 scratch.data(), isa());
  for (int64_t j = 0; j < n; ++j) {
    std::vector<bool> visible(T);
    for (int64_t t = 0; t < T; ++t) visible[t] = vis[j * T + t];
    const auto want = naive_attention(q.data() + j * heads * hd, c, heads, visible);
    for (int64_t i = 0; i < heads * hd; ++i) ASSERT_NEAR(out[j * heads * hd + i], want[i], 2e-6) << j << " " << i;
  }
  // Causal (no mask): row j sees [0, T - n + j].
  attention_rows(q.data(), heads * hd, n, c.keys(), c.values(), T, nullptr, 0, shape, out.data(), heads * hd,
                 scratch.data(), isa());
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
  const Cache c = random_cache(kv_heads, T, hd, rng, float16_cache());
  const auto q = random_vector(heads * hd, rng);
  const AttentionShape shape = this->shape(heads, c);
  std::vector<float> scratch(attention_scratch_floats(T)), in_tree(heads * hd), in_chain(heads * hd);
  std::vector<uint8_t> vis(T, 0);
  for (int64_t t = 0; t < prefix; ++t) vis[t] = 1;
  for (int64_t a : path) vis[prefix + a] = 1;
  attention_rows(q.data(), 0, 1, c.keys(), c.values(), T, vis.data(), T, shape, in_tree.data(), 0, scratch.data(),
                 isa());
  // The compacted cache: prefix, then the path's rows packed in order; the row is the chain's last.
  const int64_t Tc = prefix + static_cast<int64_t>(path.size());
  Cache packed{kv_heads, Tc, hd, std::vector<float>(kv_heads * Tc * hd), std::vector<float>(kv_heads * Tc * hd),
               false, {}, {}};
  for (int64_t g = 0; g < kv_heads; ++g) {
    for (int64_t t = 0; t < Tc; ++t) {
      const int64_t src = t < prefix ? t : prefix + path[t - prefix];
      std::memcpy(&packed.k[g * Tc * hd + t * hd], &c.k[g * T * hd + src * hd], hd * sizeof(float));
      std::memcpy(&packed.v[g * Tc * hd + t * hd], &c.v[g * T * hd + src * hd], hd * sizeof(float));
    }
  }
  if (float16_cache()) packed.store_as_float16();  // exact: the values are float16 already
  const AttentionShape packed_shape = this->shape(heads, packed);
  attention_rows(q.data(), 0, 1, packed.keys(), packed.values(), Tc, nullptr, 0, packed_shape, in_chain.data(), 0,
                 scratch.data(), isa());
  EXPECT_EQ(0, std::memcmp(in_tree.data(), in_chain.data(), in_tree.size() * sizeof(float)));
}

// A row's attention computed among n rows (tree mask or causal, any block of query items) is bit-identical to the
// same row computed alone: rows share the cache reads, not arithmetic.
TEST_P(DecoderOpsTest, EachRowIsBitIdenticalToTheRowAlone) {
  for (int64_t hd : {16, 24, 64, 128}) {
    SCOPED_TRACE("head_dim " + std::to_string(hd));
    std::mt19937 rng(13);
    const int64_t heads = 6, kv_heads = 2, T = 53;
    const Cache c = random_cache(kv_heads, T, hd, rng, float16_cache());
    const AttentionShape shape = this->shape(heads, c);
    std::vector<float> scratch(attention_scratch_floats(T));
    for (int64_t n : {2, 3, 5, 8, 11}) {
      const auto q = random_vector(n * heads * hd, rng);
      std::vector<uint8_t> vis(n * T, 1);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t t = T - n; t < T; ++t) vis[j * T + t] = (t - (T - n) == j) || (t - (T - n) < j && rng() % 2);
      std::vector<float> together(n * heads * hd), alone(heads * hd);
      // Tree mask.
      attention_rows(q.data(), heads * hd, n, c.keys(), c.values(), T, vis.data(), T, shape, together.data(),
                     heads * hd, scratch.data(), isa());
      for (int64_t j = 0; j < n; ++j) {
        attention_rows(q.data() + j * heads * hd, 0, 1, c.keys(), c.values(), T, vis.data() + j * T, T, shape,
                       alone.data(), 0, scratch.data(), isa());
        ASSERT_EQ(0, std::memcmp(alone.data(), together.data() + j * heads * hd, alone.size() * sizeof(float)))
            << "tree mask, n = " << n << ", row " << j;
      }
      // Causal: row j alone is the last row of a cache of T - n + j + 1 rows.
      attention_rows(q.data(), heads * hd, n, c.keys(), c.values(), T, nullptr, 0, shape, together.data(),
                     heads * hd, scratch.data(), isa());
      for (int64_t j = 0; j < n; ++j) {
        attention_rows(q.data() + j * heads * hd, 0, 1, c.keys(), c.values(), T - n + j + 1, nullptr, 0, shape,
                       alone.data(), 0, scratch.data(), isa());
        ASSERT_EQ(0, std::memcmp(alone.data(), together.data() + j * heads * hd, alone.size() * sizeof(float)))
            << "causal, n = " << n << ", row " << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(IsaAndCache, DecoderOpsTest,
                         ::testing::Combine(::testing::Values(KernelIsa::Portable, KernelIsa::Avx2, KernelIsa::Avx512),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(kernel_isa_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_float16_cache" : "_float32_cache");
                         });

// The float16 cache's store rounds to nearest even, as the checkpoint conversions do, on every path.
TEST(DecoderOps, FloatToHalfRowsRoundsAsFloatToHalf) {
  std::mt19937 rng(21);
  std::vector<float> x = random_vector(4099, rng, 70000.0f);
  for (float special : {0.0f, -0.0f, 65504.0f, 65520.0f, 1e-8f, -6.1e-5f, 5.96e-8f, 2.98e-8f}) x.push_back(special);
  std::vector<uint16_t> got(x.size());
  float_to_half_rows(x.data(), static_cast<int64_t>(x.size()), got.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], float_to_half(x[i])) << "x = " << x[i];
}

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
