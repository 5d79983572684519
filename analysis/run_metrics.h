// Per-run headline numbers: tau (mean accepted tokens per cycle, bonus token included), speedup against the
// vanilla run of the same dataset and temperature in the same file, tokens/s, and the vanilla-equality count,
// each recomputed from the raw tables (the run attributes are only a convenience) with bootstrap intervals.
#pragma once

#include <cstdint>

#include "analysis/bootstrap.h"
#include "core/results/results_file.h"

namespace draftlab::analysis {

// The vanilla run (strategy "vanilla") with the same dataset, temperature and shard (the same process: a merged
// sweep has one vanilla run per shard, timed beside that shard's runs), or nullptr.
const RunRecord* find_vanilla(const ResultsFile& results, const RunRecord& run);

struct RunSummary {
  Estimate tau;                  // sum(accept_length) / cycles, resampling questions
  Estimate speedup;              // vanilla's sum(wall_seconds) / this run's over the questions both have; NaN
                                 // without a vanilla run
  double tokens_per_second = 0;  // sum(new_tokens) / sum(wall_seconds)
  int64_t questions = 0;
  int64_t identical = 0;         // question turns with identical == 1
  int64_t checked = 0;           // question turns with identical != -1
  bool is_vanilla = false;
};

RunSummary summarize_run(const ResultsFile& results, const RunRecord& run, const BootstrapOptions& options = {});

}  // namespace draftlab::analysis
