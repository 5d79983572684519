#include "core/training/progress.h"

#include <unistd.h>

#include <cstdio>

namespace draftlab {

namespace {
double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

ProgressLine::ProgressLine(int64_t total_steps, int64_t every, bool quiet)
    : total_steps_(total_steps), every_(every > 0 ? every : 1), quiet_(quiet), terminal_(::isatty(STDERR_FILENO)) {
  restart();
}

void ProgressLine::restart() {
  start_ = last_draw_ = std::chrono::steady_clock::now();
  tokens_ = steps_ = 0;
}

double ProgressLine::tokens_per_second() const {
  const double s = seconds_between(start_, std::chrono::steady_clock::now());
  return s > 0 ? static_cast<double>(tokens_) / s : 0.0;
}

void ProgressLine::update(int64_t step, double loss, double learning_rate, int64_t tokens) {
  tokens_ += tokens;
  ++steps_;
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  // A terminal is redrawn at most 5 times a second; a log gets every `every`-th step and the last.
  if (terminal_ ? (seconds_between(last_draw_, now) < 0.2 && step != total_steps_)
                : (step % every_ != 0 && step != total_steps_))
    return;
  last_draw_ = now;
  const double elapsed = seconds_between(start_, now);
  const double eta = elapsed / static_cast<double>(steps_) * static_cast<double>(total_steps_ - step);
  std::fprintf(stderr, "%sstep %ld/%ld  loss %.4f  lr %.2e  %.0f tokens/s  ETA %.0f s%s", terminal_ ? "\r" : "",
               static_cast<long>(step), static_cast<long>(total_steps_), loss, learning_rate, tokens_per_second(),
               eta, terminal_ ? "   " : "\n");
  pending_ = terminal_;
  std::fflush(stderr);
}

void ProgressLine::message(const std::string& text) {
  if (quiet_) return;
  std::fprintf(stderr, "%s%s\n", pending_ ? "\n" : "", text.c_str());
  pending_ = false;
}

}  // namespace draftlab
