#include "core/training/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace draftlab {

double CosineSchedule::at(int64_t step) const {
  if (step < warmup_steps) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  const double cosine = 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
  return peak * (min_ratio + (1.0 - min_ratio) * cosine);
}

}  // namespace draftlab
