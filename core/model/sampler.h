// Sampler - turns logits into the distribution decoding draws from, and draws from it reproducibly.
//
// distribution() is the single definition of "the target's distribution" (temperature, then top-k and top-p in
// the chosen order, renormalised): vanilla decoding samples from it, and a lossless verifier reproduces exactly it.
// The order matters only when both are set. Default top-k then top-p, as Hugging Face generate() and llama.cpp
// apply them; top_p_first = the official EAGLE code's order (its prepare_logits_processor: temperature, top-p,
// top-k), for reproducing its T > 0 numbers.
// Draws use the Sampler's own seeded 64-bit Mersenne twister on the host, so runs repeat across devices.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace draftlab {

struct SamplingParams {
  double temperature = 0.0;  // <= 0: greedy (argmax; ties -> lowest id)
  int64_t top_k = 0;         // 0: off
  double top_p = 1.0;        // 1: off. Keeps the smallest set of most probable tokens whose mass reaches top_p.
  bool top_p_first = false;  // apply top-p before top-k (see above)

  bool greedy() const { return temperature <= 0.0; }
  void validate() const;  // throws Error naming the bad field
};

// --sampling-order: "top_k,top_p" (default) or "top_p,top_k" to SamplingParams::top_p_first, and back. Throws Error
// naming the flag for anything else.
bool parse_sampling_order(const std::string& text);
std::string sampling_order_name(bool top_p_first);

class Sampler {
 public:
  explicit Sampler(SamplingParams params, uint64_t seed = 0);

  const SamplingParams& params() const { return params_; }

  // logits [vocab] (any float dtype/device) -> probabilities [vocab], float32 on CPU, summing to 1.
  // Greedy: one-hot at the argmax.
  at::Tensor distribution(const at::Tensor& logits) const;

  // Next token: argmax when greedy, else a draw from distribution(logits).
  int64_t sample(const at::Tensor& logits);

  // A draw from probabilities [vocab] (float32, CPU, non-negative; need not be normalised).
  int64_t sample_from(const at::Tensor& probs);

  // Up to k distinct tokens drawn one after another, each from probs with the earlier draws removed (sampling
  // without replacement, in draw order); fewer when probs has fewer than k tokens with mass.
  std::vector<int64_t> sample_without_replacement(const at::Tensor& probs, int64_t k);

  // Uniform in [0, 1), from the same stream (acceptance tests of speculative sampling use it).
  double uniform();

 private:
  int64_t draw(const float* probs, int64_t n, double total);  // index with mass, proportional to it

  SamplingParams params_;
  std::mt19937_64 rng_;
};

}  // namespace draftlab
