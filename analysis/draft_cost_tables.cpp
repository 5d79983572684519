// What each drafter pays and gets per cycle (`draftlab table` of the drafters experiment): the draft's time per
// cycle and per drafted node, the verify forward's time, how often it drafts at all, and the conditional
// acceptance at each slot (the speculation profile's, so the numbers agree with `table --profile`).
#include "analysis/paper_table_parts.h"
#include "analysis/speculation_profile.h"

namespace draftlab::analysis::table_parts {

namespace {

// One run's cost and acceptance, NaN where undefined (no cycles, nothing drafted, no draft at a slot).
struct DraftCost {
  double draft_ms_per_cycle = NAN, draft_us_per_node = NAN, nodes_per_cycle = NAN, verify_ms_per_cycle = NAN;
  double drafting_share = NAN;  // cycles with at least one drafted node / cycles
  std::vector<double> alpha;    // conditional acceptance at slots 1..
};

DraftCost draft_cost(const RunRecord& run) {
  DraftCost c;
  const CycleRows& cycles = run.cycles;
  const size_t n = cycles.size();
  if (n == 0) return c;
  double draft = 0, verify = 0, nodes = 0, drafting = 0;
  for (size_t i = 0; i < n; ++i) {
    draft += cycles.draft_seconds[i];
    verify += cycles.verify_seconds[i];
    nodes += cycles.drafted[i];
    drafting += cycles.drafted[i] > 0;
  }
  c.draft_ms_per_cycle = 1e3 * draft / n;
  c.draft_us_per_node = nodes > 0 ? 1e6 * draft / nodes : NAN;
  c.nodes_per_cycle = nodes / n;
  c.verify_ms_per_cycle = 1e3 * verify / n;
  c.drafting_share = drafting / n;
  c.alpha = speculation_profile(run).conditional;
  return c;
}

// Mean of the finite values (a method's mean over the sets), NaN when there are none.
double finite_mean(const std::vector<double>& values) {
  double sum = 0;
  int count = 0;
  for (double v : values)
    if (std::isfinite(v)) sum += v, ++count;
  return count ? sum / count : NAN;
}

}  // namespace

std::vector<Table> draft_cost_tables(const Context& ctx, int max_slots) {
  std::vector<Table> tables;
  for (double t : ctx.temperatures) {
    std::vector<std::pair<std::string, std::vector<DraftCost>>> methods;  // per method, its runs at t
    size_t slots = 0;
    for (const std::string& m : ctx.methods) {
      std::vector<DraftCost> runs;
      for (const std::string& d : ctx.datasets) {
        const int i = ctx.find(m, d, t);
        if (i < 0) continue;
        runs.push_back(draft_cost(ctx.results.runs[i]));
        slots = std::max(slots, std::min<size_t>(runs.back().alpha.size(), max_slots));
      }
      if (!runs.empty()) methods.emplace_back(m, std::move(runs));
    }
    if (methods.empty()) continue;
    Table table;
    table.title = "Temperature = " + temperature_text(t) + ": draft cost and acceptance by slot (mean over sets)";
    table.columns = {"Method", "Draft ms / cycle", "Draft µs / node", "Nodes / cycle", "Verify ms / cycle",
                     "Drafting cycles"};
    for (size_t k = 1; k <= slots; ++k) table.columns.push_back("α" + std::to_string(k));
    for (const auto& [method, runs] : methods) {
      auto mean_of = [&](double DraftCost::*field) {
        std::vector<double> values;
        for (const DraftCost& c : runs) values.push_back(c.*field);
        return finite_mean(values);
      };
      std::vector<Cell> row{Cell(method), fixed(mean_of(&DraftCost::draft_ms_per_cycle), 2),
                            fixed(mean_of(&DraftCost::draft_us_per_node), 0),
                            fixed(mean_of(&DraftCost::nodes_per_cycle), 2),
                            fixed(mean_of(&DraftCost::verify_ms_per_cycle), 2),
                            fixed(100 * mean_of(&DraftCost::drafting_share), 0, "%")};
      for (size_t k = 0; k < slots; ++k) {
        std::vector<double> values;
        for (const DraftCost& c : runs) values.push_back(k < c.alpha.size() ? c.alpha[k] : NAN);
        row.push_back(fixed(finite_mean(values), 2));
      }
      table.rows.push_back(row);
    }
    table.notes.push_back(
        "Per cycle: time in the strategy (drafting, and skipped cycles' bookkeeping) and in the target's verify "
        "forward with acceptance, over every cycle of the last repeat; µs / node: draft time over drafted nodes "
        "(a node is a drafted token, in a tree one per branch). Drafting cycles: share of cycles that drafted "
        "anything (k=auto and total_tokens=auto may draft nothing). αk: accepted at slot k given slot k - 1 "
        "accepted and something drafted at k (SPEED-Bench's conditional acceptance; `table --profile` per set).");
    tables.push_back(table);
  }
  return tables;
}

}  // namespace draftlab::analysis::table_parts
