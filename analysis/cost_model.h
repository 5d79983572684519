// CostModel - what one target forward of n new rows costs on one machine after `cached` tokens, as measured by
// bench/forward_cost --out (file format "draftlab-cost/1": a curve of median seconds over n per cached length).
// Between measured points it interpolates linearly in n and in the cached length; past the last n it extends
// the last segment; outside the cached lengths it uses the nearest curve (attention is a small share at the
// lengths we run, so the error stays small; bounds reports the model's error against the recorded verify times).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/results/results_file.h"

namespace draftlab::analysis {

struct CostCurve {
  int64_t cached = 0;
  std::vector<std::pair<int64_t, double>> points;  // (n, seconds), n increasing from 1
};

struct CostModel {
  std::string source;       // the file
  std::string description;  // model, forward path, cpu, threads: the environment the numbers belong to
  std::vector<CostCurve> curves;  // cached increasing

  double seconds(int64_t n, int64_t cached) const;
};

// Reads a cost file. Throws Error naming the file and the field on anything else than the format above (missing
// or non-positive times, n not increasing from 1, no curves).
CostModel read_cost_model(const std::string& path);
CostModel parse_cost_model(const std::string& json_text, const std::string& source);

// The model a results file records (attribute cost_model, `exp --cost`), none when it has none; Error naming the file
// and the attribute when the text is not a cost model.
std::optional<CostModel> recorded_cost_model(const ResultsFile& results, const std::string& path);

}  // namespace draftlab::analysis
