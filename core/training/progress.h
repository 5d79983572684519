// The progress line of a training run: step, loss, tokens/s, ETA, drawn by ProgressMeter (core/base): redrawn on a
// terminal; in a log (CI, a pipe) a plain line every `every` steps, so logs stay readable; quiet prints nothing.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/progress_meter.h"

namespace draftlab {

class ProgressLine {
 public:
  ProgressLine(int64_t total_steps, int64_t every, bool quiet);

  // After step `step` (1-based count of steps done) with its loss and the tokens it consumed.
  void update(int64_t step, double loss, double learning_rate, int64_t tokens);

  // A line that must not be overwritten (evaluation results, checkpoints); ends a pending \r line first.
  void message(const std::string& text) { meter_.message(text); }

  // Tokens per second since construction (or the last restart()).
  double tokens_per_second() const;
  void restart();

 private:
  int64_t total_steps_, every_;
  int64_t tokens_ = 0, steps_ = 0;
  ProgressMeter meter_;
};

}  // namespace draftlab
