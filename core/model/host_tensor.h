// Host tensors: reading small CPU tensors in place on the decode path.
//
// A libtorch op costs one to three microseconds of dispatch and allocation whatever its size. A cycle of a small
// model on the native CPU path is a few dozen microseconds of forwards, so the argmax, top-k, softmax and range
// checks around them read the tensor's own memory when it is a contiguous CPU tensor of the expected dtype. Any
// other tensor (CUDA, another dtype, a strided view) is converted first, with the same result.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <utility>

namespace draftlab {

// A defined, contiguous CPU tensor of `dtype`: its data can be read as that type.
bool is_host(const at::Tensor& t, at::ScalarType dtype);
// t itself when is_host(t, dtype), else a contiguous CPU copy converted to dtype.
at::Tensor to_host(const at::Tensor& t, at::ScalarType dtype);

// The index of the largest of x[0, n): the first on ties, the first NaN if there is one (at::argmax's rules).
int64_t argmax_of(const float* x, int64_t n);
// argmax over every element of logits (any shape, any floating dtype, any device).
int64_t argmax_of(const at::Tensor& logits);

// softmax(logits)[token] for a 1-D row of logits.
float softmax_probability(const at::Tensor& logits, int64_t token);

// Per row of x [n, V] (row stride V): the k largest entries, largest first (ties: the lower index first), with
// their softmax probabilities. tokens and probs have room for n * k.
void top_k_softmax(const float* x, int64_t n, int64_t V, int64_t k, int64_t* tokens, float* probs);

// The smallest and the largest entry of a non-empty int64 tensor.
std::pair<int64_t, int64_t> min_max_of(const at::Tensor& ids);

}  // namespace draftlab
