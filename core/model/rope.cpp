#include "core/model/rope.h"

#include <cmath>

#include "core/base/error.h"

namespace draftlab {

namespace {
constexpr double kPi = 3.14159265358979323846;
}  // namespace

std::vector<double> RotaryEmbedding::inverse_frequencies(const ModelConfig& config) {
  const int64_t half = config.head_dim / 2;
  std::vector<double> inv(half);
  for (int64_t j = 0; j < half; ++j)
    inv[j] = 1.0 / std::pow(config.rope_theta, static_cast<double>(2 * j) / static_cast<double>(config.head_dim));

  const RopeScaling& s = config.rope_scaling;
  if (s.type == "linear") {
    for (double& f : inv) f /= s.factor;
  } else if (s.type == "llama3") {
    // Llama 3.1: long wavelengths are slowed by `factor`, short ones kept, and the band between interpolated.
    const double old_len = static_cast<double>(s.original_max_position_embeddings);
    const double low_freq_wavelen = old_len / s.low_freq_factor;
    const double high_freq_wavelen = old_len / s.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2.0 * kPi / f;
      if (wavelen < high_freq_wavelen) continue;
      if (wavelen > low_freq_wavelen) {
        f /= s.factor;
      } else {
        const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
  }
  return inv;
}

RotaryEmbedding::RotaryEmbedding(const ModelConfig& config, const ComputeOptions& options) {
  const std::vector<double> inv = inverse_frequencies(config);
  const int64_t half = static_cast<int64_t>(inv.size());
  const int64_t max_pos = config.max_position_embeddings;
  auto angles = at::empty({max_pos, half}, at::TensorOptions().dtype(at::kDouble));
  double* a = angles.data_ptr<double>();
  for (int64_t p = 0; p < max_pos; ++p)
    for (int64_t j = 0; j < half; ++j) a[p * half + j] = static_cast<double>(p) * inv[j];
  cos_ = angles.cos().to(options.device, options.dtype);
  sin_ = angles.sin().to(options.device, options.dtype);
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::at_positions(const at::Tensor& positions) const {
  const int64_t n = positions.size(0);
  return {cos_.index_select(0, positions).view({n, 1, -1}), sin_.index_select(0, positions).view({n, 1, -1})};
}

at::Tensor RotaryEmbedding::apply(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
}

}  // namespace draftlab
