// ProgressMeter - when and where a long job reports progress on stderr, shared by training and experiments.
// On a terminal one line is redrawn in place, at most 5 times a second; in a log (a file, a pipe, Slurm) a plain
// line whenever the caller says one is due, and after the last unit; quiet prints nothing. Callers format the text;
// the meter supplies the elapsed time, the rate and the ETA.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace draftlab {

class ProgressMeter {
 public:
  ProgressMeter(int64_t total, bool quiet);
  ~ProgressMeter();  // clears a pending terminal line

  // Whether to draw now, after `done` units: on a terminal by time, in a log when `log_due` (or at the end).
  bool due(int64_t done, bool log_due) const;
  // Draws `text` (\r-redrawn on a terminal, a line in a log) and remembers when.
  void draw(const std::string& text);
  // A line that must stay (results, checkpoints): ends a pending terminal line first.
  void message(const std::string& text);
  void restart();  // the clock and the rate start again
  void set_total(int64_t total) { total_ = total; }  // when the size is known only once the job runs

  double elapsed_seconds() const;
  double seconds_since_draw() const;
  // Seconds left at the rate so far, negative when unknown (nothing done yet).
  double eta_seconds(int64_t done) const;
  bool quiet() const { return quiet_; }

 private:
  int64_t total_;
  bool quiet_, terminal_, pending_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "45s", "3m12s", "1h02m" (negative: "?").
std::string duration_text(double seconds);

}  // namespace draftlab
