// Sampler - turns logits into the distribution decoding draws from, and draws from it reproducibly.
//
// distribution() is the single definition of "the target's distribution" (temperature, then top-k, then top-p,
// renormalised): vanilla decoding samples from it, and a lossless verifier must reproduce exactly it.
// Draws use the Sampler's own seeded 64-bit Mersenne twister on the host, so runs repeat across devices.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <random>

namespace draftlab {

struct SamplingParams {
  double temperature = 0.0;  // <= 0: greedy (argmax; ties -> lowest id)
  int64_t top_k = 0;         // 0: off
  double top_p = 1.0;        // 1: off. Keeps the smallest set of most probable tokens whose mass reaches top_p.

  bool greedy() const { return temperature <= 0.0; }
  void validate() const;  // throws Error naming the bad field
};

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

  // Uniform in [0, 1), from the same stream (acceptance tests of speculative sampling use it).
  double uniform();

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

}  // namespace draftlab
