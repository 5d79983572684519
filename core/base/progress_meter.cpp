#include "core/base/progress_meter.h"

#include <unistd.h>

#include <cstdio>

namespace draftlab {

namespace {
double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

ProgressMeter::ProgressMeter(int64_t total, bool quiet)
    : total_(total), quiet_(quiet), terminal_(::isatty(STDERR_FILENO)) {
  restart();
}

ProgressMeter::~ProgressMeter() {
  if (pending_) std::fprintf(stderr, "\n");
}

void ProgressMeter::restart() { start_ = last_draw_ = std::chrono::steady_clock::now(); }

double ProgressMeter::elapsed_seconds() const { return seconds_between(start_, std::chrono::steady_clock::now()); }

double ProgressMeter::seconds_since_draw() const { return seconds_between(last_draw_, std::chrono::steady_clock::now()); }

double ProgressMeter::eta_seconds(int64_t done) const {
  if (done <= 0) return -1.0;
  return elapsed_seconds() / static_cast<double>(done) * static_cast<double>(total_ - done);
}

bool ProgressMeter::due(int64_t done, bool log_due) const {
  if (quiet_) return false;
  if (done >= total_) return true;
  return terminal_ ? seconds_since_draw() >= 0.2 : log_due;
}

void ProgressMeter::draw(const std::string& text) {
  if (quiet_) return;
  last_draw_ = std::chrono::steady_clock::now();
  if (terminal_)
    std::fprintf(stderr, "\r\033[K%s", text.substr(0, 160).c_str());
  else
    std::fprintf(stderr, "%s\n", text.c_str());
  pending_ = terminal_;
  std::fflush(stderr);
}

void ProgressMeter::message(const std::string& text) {
  if (quiet_) return;
  std::fprintf(stderr, "%s%s\n", pending_ ? "\n" : "", text.c_str());
  pending_ = false;
}

std::string duration_text(double seconds) {
  if (seconds < 0) return "?";
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

}  // namespace draftlab
