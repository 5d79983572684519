#include "core/model/sampler.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/base/error.h"
#include "core/model/host_tensor.h"

namespace draftlab {

void SamplingParams::validate() const {
  check(top_k >= 0, "--top-k: expected >= 0, got " + std::to_string(top_k));
  check(top_p > 0.0 && top_p <= 1.0, "--top-p: expected a value in (0, 1], got " + std::to_string(top_p));
  check(temperature >= 0.0, "--temperature: expected >= 0, got " + std::to_string(temperature));
}

Sampler::Sampler(SamplingParams params, uint64_t seed) : params_(params), rng_(seed) { params_.validate(); }

at::Tensor Sampler::distribution(const at::Tensor& logits_in) const {
  auto logits = logits_in.reshape({-1}).to(at::kCPU, at::kFloat);
  const int64_t vocab = logits.size(0);
  if (params_.greedy()) {
    auto p = at::zeros({vocab}, logits.options());
    p[logits.argmax().item<int64_t>()] = 1.0f;
    return p;
  }
  auto scaled = logits / params_.temperature;
  const float inf = std::numeric_limits<float>::infinity();
  const bool top_k = params_.top_k > 0 && params_.top_k < vocab;
  if (top_k && !params_.top_p_first) {
    // Everything below the k-th largest logit is removed (ties at the threshold are kept, as HF does).
    auto kth = std::get<0>(scaled.topk(params_.top_k)).min();
    scaled = scaled.masked_fill(scaled < kth, -inf);
  }
  auto probs = at::softmax(scaled, 0);
  if (params_.top_p < 1.0) {
    // Sort descending; drop a token when the mass strictly before it already reaches top_p.
    auto [sorted, order] = probs.sort(/*dim=*/0, /*descending=*/true);
    auto mass_before = sorted.cumsum(0) - sorted;
    auto drop_sorted = mass_before >= params_.top_p;
    auto drop = at::zeros_like(drop_sorted).scatter(0, order, drop_sorted);
    probs = probs.masked_fill(drop, 0.0f);
    probs = probs / probs.sum();
    if (top_k && params_.top_p_first) scaled = scaled.masked_fill(drop, -inf);
  }
  if (top_k && params_.top_p_first) {
    // Then the k largest of what top-p kept (all of it when that is fewer than k), as HF's TopKLogitsWarper after
    // TopPLogitsWarper.
    auto kth = std::get<0>(scaled.topk(params_.top_k)).min();
    if (std::isfinite(kth.item<float>())) probs = at::softmax(scaled.masked_fill(scaled < kth, -inf), 0);
  }
  return probs;
}

int64_t Sampler::sample(const at::Tensor& logits) {
  if (params_.greedy()) return argmax_of(logits);  // read in place on the CPU: no dispatch per token
  return sample_from(distribution(logits));
}

double Sampler::uniform() {
  // 53 random bits -> a double in [0, 1), independent of the standard library's distribution implementations.
  return static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0);
}

int64_t Sampler::sample_from(const at::Tensor& probs_in) {
  auto probs = probs_in.to(at::kCPU, at::kFloat).contiguous();
  const float* p = probs.data_ptr<float>();
  const int64_t n = probs.numel();
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += p[i];
  check(total > 0.0, "sample_from: distribution has no mass");
  return draw(p, n, total);
}

std::vector<int64_t> Sampler::sample_without_replacement(const at::Tensor& probs_in, int64_t k) {
  auto probs = probs_in.to(at::kCPU, at::kFloat).contiguous().clone();
  float* p = probs.data_ptr<float>();
  const int64_t n = probs.numel();
  std::vector<int64_t> tokens;
  while (static_cast<int64_t>(tokens.size()) < k) {
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) total += p[i];
    if (!(total > 0.0)) break;
    tokens.push_back(draw(p, n, total));
    p[tokens.back()] = 0.0f;
  }
  return tokens;
}

int64_t Sampler::draw(const float* p, int64_t n, double total) {
  const double u = uniform() * total;
  double acc = 0.0;
  int64_t last_nonzero = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] <= 0.0f) continue;
    acc += p[i];
    last_nonzero = i;
    if (u < acc) return i;
  }
  return last_nonzero;  // rounding: u landed past the final partial sum
}

bool parse_sampling_order(const std::string& text) {
  if (text == "top_k,top_p") return false;
  if (text == "top_p,top_k") return true;
  throw Error("--sampling-order: expected top_k,top_p (Hugging Face, llama.cpp) or top_p,top_k (official EAGLE code), "
              "got '" + text + "'");
}

std::string sampling_order_name(bool top_p_first) { return top_p_first ? "top_p,top_k" : "top_k,top_p"; }

}  // namespace draftlab
