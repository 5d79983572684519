// The acceptance tables of `draftlab table`: n-α per run, draft calibration, per-position acceptance of static
// trees (paper_tables.cpp maps experiments to them).
#include <Eigen/Dense>

#include "analysis/acceptance.h"
#include "analysis/calibration.h"
#include "analysis/paper_table_parts.h"

namespace draftlab::analysis::table_parts {

std::vector<std::string> alpha_headers(int max_n) {
  std::vector<std::string> out;
  for (int n = 0; n <= max_n; ++n) out.push_back(std::to_string(n) + "-α");
  return out;
}

Table alpha_table(const Context& ctx, bool with_speedup, int max_n, bool cumulative) {
  Table table;
  if (cumulative) table.title = "cumulative n-α (the official code's getkacc)";
  table.columns = {"T", "Dataset", "Method"};
  if (with_speedup) table.columns.push_back("Speedup");
  table.columns.push_back("τ");
  for (const std::string& h : alpha_headers(max_n)) table.columns.push_back(h);
  for (double t : ctx.temperatures)
    for (const std::string& d : ctx.datasets)
      for (const std::string& m : ctx.methods) {
        const int i = ctx.find(m, d, t);
        if (i < 0) continue;
        std::vector<Cell> row{Cell(temperature_text(t)), Cell(dataset_display_name(d)), Cell(m)};
        if (with_speedup) row.push_back(ctx.speedup(i));
        row.push_back(ctx.tau(i));
        const RunRecord& run = ctx.results.runs[i];
        for (const AlphaCount& a : cumulative ? cumulative_n_alpha(run, max_n) : n_alpha(run, max_n))
          row.push_back(fixed(a.alpha(), 2));
        table.rows.push_back(row);
      }
  table.notes.push_back(
      cumulative ? "cumulative n-α: the chance that the first n + 1 tokens of the draft's most probable chain are all "
                   "accepted (for a chain, the product of the conditional n-α; the paper's Table 2 is conditional)."
                 : "n-α: acceptance rate of the drafts' most probable tokens at depth n + 1 whose parent was accepted "
                   "(n imprecise features in the draft's input).");
  return table;
}


namespace {

bool has_confidence(const RunRecord& run) {
  return std::any_of(run.nodes.confidence.begin(), run.nodes.confidence.end(), [](float c) { return !std::isnan(c); });
}

}  // namespace

std::vector<Table> calibration_tables(const Context& ctx) {
  std::vector<Table> tables;
  for (const RunRecord& run : ctx.results.runs) {
    if (is_baseline(run) || !has_confidence(run)) continue;
    const std::string label = run.method + ", " + dataset_display_name(run.dataset) + ", T = " +
                              temperature_text(run.temperature);
    const Calibration cal = calibrate(run);
    Table bins;
    bins.title = label;
    bins.columns = {"Confidence", "Drafted", "Tested", "Accepted", "Acceptance rate", "Mean confidence"};
    for (const CalibrationBin& b : cal.bins) {
      if (b.drafted == 0) continue;
      bins.rows.push_back({Cell("[" + fixed(b.lower, 2) + ", " + fixed(b.upper, 2) + (b.upper >= 1 ? "]" : ")")),
                           Cell(std::to_string(b.drafted)), Cell(std::to_string(b.tested)),
                           Cell(std::to_string(b.accepted)), Cell(fixed(b.acceptance_rate, 3)),
                           Cell(fixed(b.mean_confidence, 3))});
    }
    bins.notes.push_back("ECE " + fixed(cal.ece, 4) + " over " + std::to_string(cal.tested) +
                         " tested nodes (parent accepted); acceptance " +
                         fixed(cal.tested ? static_cast<double>(cal.accepted) / cal.tested : NAN, 3) + ".");
    tables.push_back(bins);

    Table depths;
    depths.title = label + ": per depth";
    depths.columns = {"Depth", "Tested", "Acceptance rate", "Mean confidence", "ECE"};
    for (const auto& [depth, c] : calibrate_by_depth({&run})) {
      double conf = 0;
      for (const CalibrationBin& b : c.bins)
        if (b.tested) conf += b.mean_confidence * b.tested;
      depths.rows.push_back({Cell(std::to_string(depth)), Cell(std::to_string(c.tested)),
                             Cell(fixed(c.tested ? static_cast<double>(c.accepted) / c.tested : NAN, 3)),
                             Cell(fixed(c.tested ? conf / c.tested : NAN, 3)), Cell(fixed(c.ece, 4))});
    }
    tables.push_back(depths);
  }
  if (tables.empty()) tables.push_back(note_table("No run with draft confidences in this file."));
  return tables;
}

std::vector<Table> position_tables(const Context& ctx) {
  std::vector<Table> tables;
  for (const RunRecord& run : ctx.results.runs) {
    if (run.draft_shape != draft_shapes::static_tree) continue;
    const PositionAcceptance pa = position_acceptance(run);
    Table table;
    table.title = run.method + ", " + dataset_display_name(run.dataset) + ", T = " + temperature_text(run.temperature);
    table.columns = {"Position", "Depth", "Questions", "Pooled", "Mean", "SD", "Min", "Max"};
    for (size_t p = 0; p < pa.positions.size(); ++p) {
      std::vector<double> rates;
      double drafted = 0, accepted = 0;
      for (Eigen::Index q = 0; q < pa.rate.rows(); ++q) {
        if (pa.drafted(q, p) == 0) continue;
        rates.push_back(pa.rate(q, p));
        drafted += pa.drafted(q, p);
        accepted += pa.rate(q, p) * pa.drafted(q, p);
      }
      const Eigen::Map<Eigen::VectorXd> r(rates.data(), static_cast<Eigen::Index>(rates.size()));
      const double mean = rates.empty() ? NAN : r.mean();
      const double sd = rates.size() < 2 ? NAN : std::sqrt((r.array() - mean).square().sum() / (rates.size() - 1));
      table.rows.push_back({Cell("P" + std::to_string(pa.positions[p])), Cell(std::to_string(pa.depths[p])),
                            Cell(std::to_string(rates.size())), Cell(fixed(drafted ? accepted / drafted : NAN, 3)),
                            Cell(fixed(mean, 3)), Cell(fixed(sd, 3)),
                            Cell(fixed(rates.empty() ? NAN : r.minCoeff(), 3)),
                            Cell(fixed(rates.empty() ? NAN : r.maxCoeff(), 3))});
    }
    table.notes.push_back("Per question: accepted / drafted at each tree position; Pooled = over all questions.");
    tables.push_back(table);
  }
  if (tables.empty()) tables.push_back(note_table("No run with a static tree (draft_shape static_tree) in this file."));
  return tables;
}


}  // namespace draftlab::analysis::table_parts
