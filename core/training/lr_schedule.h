// Learning-rate schedule: linear warm-up to the peak, then a cosine decay to min_ratio * peak at the last step.
// (Warm-up keeps Adam's first, badly estimated updates small; the cosine tail lets the loss settle.)
#pragma once

#include <cstdint>

namespace draftlab {

struct CosineSchedule {
  double peak = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_ratio = 0.1;

  // The learning rate of step `step` (0-based).
  double at(int64_t step) const;
};

}  // namespace draftlab
