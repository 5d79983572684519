// Per-run headline numbers: tau (mean accepted tokens per cycle, bonus token included), speedup against the
// baseline run (draft_shape "none") of the same dataset, temperature, shard and batch size in the same file, tokens/s, and
// the baseline-equality count, each recomputed from the raw tables (the run attributes are only a convenience),
// as point estimates and with bootstrap intervals over questions.
//
// These are THE definitions of tau and speedup: tables, drivers and `draftlab compare` call them (plot.py has
// the one Python copy, `speedup` and `tau`).
#pragma once

#include <cstdint>

#include "analysis/bootstrap.h"
#include "core/results/results_file.h"

namespace draftlab::analysis {

// A run without drafting (draft_shape "none"): the baseline speedups divide by.
bool is_baseline(const RunRecord& run);

// The baseline run with the same dataset, temperature, shard and batch size (the same process: a merged sweep has one
// baseline per shard, timed beside that shard's runs), or nullptr.
const RunRecord* find_baseline(const ResultsFile& results, const RunRecord& run);

// tau of a run: sum(cycles/accept_length) / rows of cycles/. NaN for a run without cycles.
double tau(const RunRecord& run);
// sum(new_tokens) / sum(wall_seconds) over the question turns; 0 for a run without time.
double tokens_per_second(const RunRecord& run);
// The same, with its bootstrap interval over questions.
Estimate tau_estimate(const RunRecord& run, const BootstrapOptions& options = {});

// Speedup of a run: the baseline's sum(wall_seconds) / this run's, over the question turns (question_id, turn)
// both have. NaN without a baseline or without common question turns.
double speedup(const ResultsFile& results, const RunRecord& run);
// The same, with its bootstrap interval over the paired question turns.
Estimate speedup_estimate(const ResultsFile& results, const RunRecord& run, const BootstrapOptions& options = {});

struct RunSummary {
  Estimate tau;                  // tau_estimate()
  Estimate speedup;              // speedup_estimate(); NaN without a baseline run
  double tokens_per_second = 0;  // sum(new_tokens) / sum(wall_seconds)
  int64_t questions = 0;
  int64_t identical = 0;         // question turns with identical == 1
  int64_t checked = 0;           // question turns with identical != -1
  bool is_baseline = false;
};

RunSummary summarize_run(const ResultsFile& results, const RunRecord& run, const BootstrapOptions& options = {});

}  // namespace draftlab::analysis
