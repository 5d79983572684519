#include "core/model/host_tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/base/error.h"
#include "core/ops/decoder_ops.h"

namespace draftlab {

bool is_host(const at::Tensor& t, at::ScalarType dtype) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == dtype && t.is_contiguous();
}

at::Tensor to_host(const at::Tensor& t, at::ScalarType dtype) {
  return is_host(t, dtype) ? t : t.to(at::kCPU, dtype).contiguous();
}

int64_t argmax_of(const float* x, int64_t n) {
  check(n > 0, "argmax of an empty row");
  float m = 0.0f;
  softmax_stats_rows(x, n, 1, n, &m, nullptr);  // the maximum, NaN-aware
  const bool nan = m != m;
  for (int64_t i = 0; i < n; ++i)
    if (nan ? x[i] != x[i] : x[i] == m) return i;
  return 0;  // unreachable: m is one of the values
}

int64_t argmax_of(const at::Tensor& logits) {
  // Converting to float32 is exact for float16 and bfloat16, so the argmax is the same as in the source dtype.
  const at::Tensor host = to_host(logits, at::kFloat);
  return argmax_of(host.data_ptr<float>(), host.numel());
}

float softmax_probability(const at::Tensor& logits, int64_t token) {
  const at::Tensor host = to_host(logits, at::kFloat);
  const int64_t V = host.numel();
  check(token >= 0 && token < V, "softmax_probability: token outside the row");
  const float* x = host.data_ptr<float>();
  float m = 0.0f, sum = 0.0f;
  softmax_stats_rows(x, V, 1, V, &m, &sum);
  return std::exp(x[token] - m) / sum;
}

namespace {

// Whether any of x[0, 16) is above `low`: four 4-lane compares OR-ed (GCC vectors, SSE2 on any x86-64), the test
// that lets top_k_softmax skip most of a vocabulary.
bool any_above(const float* x, float low) {
  typedef float F4 __attribute__((vector_size(16)));
  typedef int32_t I4 __attribute__((vector_size(16)));
  const F4 l = {low, low, low, low};
  I4 any = {0, 0, 0, 0};
  for (int c = 0; c < 16; c += 4) {
    F4 v;
    std::memcpy(&v, x + c, sizeof(v));
    any |= v > l;
  }
  return (any[0] | any[1] | any[2] | any[3]) != 0;
}

}  // namespace

void top_k_softmax(const float* x, int64_t n, int64_t V, int64_t k, int64_t* tokens, float* probs) {
  check(k > 0 && k <= V, "top_k_softmax: k must be in [1, V]");
  std::vector<float> m(static_cast<size_t>(n)), sum(static_cast<size_t>(n));
  softmax_stats_rows(x, V, n, V, m.data(), sum.data());
  std::vector<float> best(static_cast<size_t>(k));
  for (int64_t j = 0; j < n; ++j) {
    const float* r = x + j * V;
    int64_t* t = tokens + j * k;
    // A sorted list of the k best so far; an entry goes in only when strictly above the k-th (ties keep the lower
    // index). Blocks of 16 with nothing above the k-th are skipped after one vectorisable test.
    int64_t filled = 0;
    auto insert = [&](int64_t i) {
      const float v = r[i];
      int64_t at = filled < k ? filled++ : k - 1;
      for (; at > 0 && v > best[at - 1]; --at) {
        best[at] = best[at - 1];
        t[at] = t[at - 1];
      }
      best[at] = v;
      t[at] = i;
    };
    int64_t i = 0;
    for (; i < V && filled < k; ++i) insert(i);
    constexpr int64_t kBlock = 16;
    for (; i < V && i % kBlock != 0; ++i)
      if (r[i] > best[k - 1]) insert(i);
    for (; i + kBlock <= V; i += kBlock) {
      if (!any_above(r + i, best[k - 1])) continue;
      for (int64_t c = 0; c < kBlock; ++c)
        if (r[i + c] > best[k - 1]) insert(i + c);
    }
    for (; i < V; ++i)
      if (r[i] > best[k - 1]) insert(i);
    for (int64_t c = 0; c < k; ++c) probs[j * k + c] = std::exp(r[t[c]] - m[j]) / sum[j];
  }
}

std::pair<int64_t, int64_t> min_max_of(const at::Tensor& ids) {
  check(ids.numel() > 0, "min_max_of: empty tensor");
  const at::Tensor host = to_host(ids, at::kLong);
  const int64_t* p = host.data_ptr<int64_t>();
  const auto [lo, hi] = std::minmax_element(p, p + host.numel());
  return {*lo, *hi};
}

}  // namespace draftlab
