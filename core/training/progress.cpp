#include "core/training/progress.h"

#include <cstdio>

namespace draftlab {

ProgressLine::ProgressLine(int64_t total_steps, int64_t every, bool quiet)
    : total_steps_(total_steps), every_(every > 0 ? every : 1), meter_(total_steps, quiet) {}

void ProgressLine::restart() {
  meter_.restart();
  tokens_ = steps_ = 0;
}

double ProgressLine::tokens_per_second() const {
  const double s = meter_.elapsed_seconds();
  return s > 0 ? static_cast<double>(tokens_) / s : 0.0;
}

void ProgressLine::update(int64_t step, double loss, double learning_rate, int64_t tokens) {
  tokens_ += tokens;
  ++steps_;
  if (!meter_.due(step, step % every_ == 0)) return;
  // The rate is over the steps of this run (a resumed run starts counting at its first step).
  const double eta = meter_.elapsed_seconds() / static_cast<double>(steps_) * static_cast<double>(total_steps_ - step);
  char line[160];
  std::snprintf(line, sizeof line, "step %ld/%ld  loss %.4f  lr %.2e  %.0f tokens/s  ETA %s",
                static_cast<long>(step), static_cast<long>(total_steps_), loss, learning_rate, tokens_per_second(),
                duration_text(eta).c_str());
  meter_.draw(line);
}

}  // namespace draftlab
