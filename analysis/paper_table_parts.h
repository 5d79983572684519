// What the paper tables' builders share (paper_tables.cpp, acceptance_tables.cpp): number formats and the results
// file summarised once (Context). Internal to analysis/: paper_tables.h is the interface.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/paper_tables.h"
#include "analysis/run_metrics.h"

namespace draftlab::analysis::table_parts {

inline std::string fixed(double v, int digits, const char* suffix = "") {
  if (!std::isfinite(v)) return "–";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", digits, v, suffix);
  return buf;
}

inline std::string with_interval(const Estimate& e, int digits, const char* suffix, bool intervals) {
  std::string text = fixed(e.value, digits, suffix);
  if (intervals && e.has_interval() && std::isfinite(e.value))
    text += " [" + fixed(e.low, digits) + ", " + fixed(e.high, digits) + "]";
  return text;
}

inline std::string temperature_text(double t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", t);
  return buf;
}

// The distinct temperatures of a file's runs, ascending.
inline std::vector<double> sorted_temperatures(const ResultsFile& results) {
  std::vector<double> out;
  for (const RunRecord& run : results.runs)
    if (std::find(out.begin(), out.end(), run.temperature) == out.end()) out.push_back(run.temperature);
  std::sort(out.begin(), out.end());
  return out;
}

// Everything the tables need about the file, computed once.
struct Context {
  const ResultsFile& results;
  const TableOptions& options;
  std::vector<RunSummary> summaries;  // per run
  std::vector<std::string> datasets;  // order of first appearance
  std::vector<std::string> methods;   // all but the baselines, order of first appearance
  std::vector<double> temperatures;   // ascending

  Context(const ResultsFile& r, const TableOptions& o)
      : results(r), options(o), temperatures(sorted_temperatures(r)) {
    for (const RunRecord& run : r.runs) {
      summaries.push_back(summarize_run(r, run, o.bootstrap));
      if (std::find(datasets.begin(), datasets.end(), run.dataset) == datasets.end()) datasets.push_back(run.dataset);
      if (!is_baseline(run) && std::find(methods.begin(), methods.end(), run.method) == methods.end())
        methods.push_back(run.method);
    }
  }
  // Index of the run (method, dataset, T), or -1.
  int find(const std::string& method, const std::string& dataset, double t) const {
    for (size_t i = 0; i < results.runs.size(); ++i) {
      const RunRecord& run = results.runs[i];
      if (run.method == method && run.dataset == dataset && run.temperature == t) return static_cast<int>(i);
    }
    return -1;
  }
  std::string speedup(int i) const { return with_interval(summaries[i].speedup, 2, "x", options.intervals); }
  std::string tau(int i) const { return with_interval(summaries[i].tau, 2, "", options.intervals); }
};

// A one-cell table saying why a builder found nothing to show.
inline Table note_table(const std::string& note) {
  Table none;
  none.columns = {"Note"};
  none.rows.push_back({note});
  return none;
}

// The acceptance tables (acceptance_tables.cpp).
// One row per run but the baselines: T, dataset, method, then the chosen metrics (EAGLE Table 2 / Figure 8).
// cumulative: getkacc's n-alpha (acceptance.h) instead of the conditional one.
Table alpha_table(const Context& ctx, bool with_speedup, int max_n, bool cumulative = false);
// "0-α" .. "max_n-α".
std::vector<std::string> alpha_headers(int max_n);
// Per run with draft confidences: confidence bins and per-depth calibration.
std::vector<Table> calibration_tables(const Context& ctx);
// Per static-tree run: acceptance at each tree position across questions.
std::vector<Table> position_tables(const Context& ctx);

// Per temperature, one row per method, mean over the sets (draft_cost_tables.cpp): draft time per cycle and per
// drafted node, nodes and verify time per cycle, the share of cycles that draft, conditional acceptance at slots
// 1..max_slots.
std::vector<Table> draft_cost_tables(const Context& ctx, int max_slots = 6);

}  // namespace draftlab::analysis::table_parts
