#include "analysis/bounds_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "analysis/oracle_lengths.h"
#include "analysis/paper_table_parts.h"
#include "analysis/paper_tables.h"
#include "analysis/run_metrics.h"
#include "analysis/run_tables.h"
#include "analysis/speculation_profile.h"
#include "analysis/tree_bounds.h"
#include "core/base/error.h"

namespace draftlab::analysis {

namespace {

using table_parts::fixed;
using table_parts::temperature_text;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Tokens in the cache when each cycle starts: the question's prompt plus what earlier cycles emitted.
std::vector<int64_t> cached_at_cycles(const RunRecord& run) {
  std::vector<int64_t> out(run.cycles.size(), 0);
  for (size_t q = 0; q < run.questions.size(); ++q) {
    int64_t cached = run.questions.prompt_tokens[q];
    const auto [begin, end] = question_cycles(run, q);
    for (int64_t c = begin; c < end; ++c) {
      out[c] = cached;
      cached += run.cycles.accept_length[c];
    }
  }
  return out;
}

// Least squares draft_seconds = a + b * drafted over the cycles, both clamped at 0 (a cost is never negative).
std::pair<double, double> fit_draft_cost(const RunRecord& run) {
  const CycleRows& c = run.cycles;
  const double n = static_cast<double>(c.size());
  if (c.size() == 0) return {0.0, 0.0};
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const double x = c.drafted[i], y = c.draft_seconds[i];
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double var = sxx - sx * sx / n;
  if (var <= 1e-12) return sx > 0 ? std::pair{0.0, sy / sx} : std::pair{sy / n, 0.0};  // one node count: per node
  const double b = std::max((sxy - sx * sy / n) / var, 0.0);
  return {std::max((sy - b * sx) / n, 0.0), b};
}

struct CycleTotals {
  double seconds = 0;         // drafting + verification
  double verify_seconds = 0;  // verification alone
  double tokens = 0;          // sum of accept lengths
};
CycleTotals cycle_totals(const RunRecord& run) {
  CycleTotals t;
  for (size_t c = 0; c < run.cycles.size(); ++c) {
    t.seconds += run.cycles.draft_seconds[c] + run.cycles.verify_seconds[c];
    t.verify_seconds += run.cycles.verify_seconds[c];
    t.tokens += run.cycles.accept_length[c];
  }
  return t;
}

// What a step costs beyond the cost model's forward, as this file's runs recorded it: for plain decoding, its
// cycles' verify time less c(1) (a bench forward and the loop's differ a little); for speculative cycles, the
// median over the drafting runs of the same dataset and temperature of their mean verify time less c(drafted + 1)
// (the tree's rows and mask, acceptance, compaction, and whatever makes a forward slower inside the loop than in
// the bench). One figure per file and group, not per run,
// so that the verify model's error of each run stays a test of the model.
struct LoopOverheads {
  double plain = 0, speculative = 0;
};
double mean_excess(const RunRecord& run, const CostModel& cost) {
  const std::vector<int64_t> cached = cached_at_cycles(run);
  double sum = 0;
  for (size_t c = 0; c < run.cycles.size(); ++c)
    sum += run.cycles.verify_seconds[c] - cost.seconds(run.cycles.drafted[c] + 1, cached[c]);
  return run.cycles.size() == 0 ? 0.0 : sum / static_cast<double>(run.cycles.size());
}
LoopOverheads loop_overheads(const ResultsFile& results, const RunRecord& run, const CostModel& cost) {
  LoopOverheads o;
  if (const RunRecord* base = find_baseline(results, run)) o.plain = mean_excess(*base, cost);
  std::vector<double> excess;
  for (const RunRecord& r : results.runs)
    if (!is_baseline(r) && r.dataset == run.dataset && r.temperature == run.temperature && r.cycles.size() > 0)
      excess.push_back(mean_excess(r, cost));
  if (!excess.empty()) {
    std::sort(excess.begin(), excess.end());
    const size_t n = excess.size();
    o.speculative = n % 2 ? excess[n / 2] : 0.5 * (excess[n / 2 - 1] + excess[n / 2]);
  }
  // A loop faster than the bench's forward (the bench's n = 1 step can be the slower one) makes an excess
  // negative; no more than half the cheapest forward, so that every modelled step keeps a positive cost.
  const double floor = -0.5 * cost.seconds(1, 0);
  o.plain = std::max(o.plain, floor);
  o.speculative = std::max(o.speculative, floor);
  return o;
}

std::vector<double> acceptance_or_zero(const std::vector<AlphaCount>& counts) {
  std::vector<double> p;
  for (const AlphaCount& c : counts) {
    const double a = c.alpha();
    p.push_back(std::isfinite(a) ? a : 0.0);  // a rank never tested contributes nothing to Sequoia's trees
  }
  return p;
}

// A step as the model prices it: the cost model's forward plus the loop's overhead as the file recorded it.
struct StepCost {
  const CostModel& cost;
  LoopOverheads over;
  double plain(int64_t cached) const { return cost.seconds(1, cached) + over.plain; }
  double cycle(int64_t rows, int64_t cached) const { return cost.seconds(rows, cached) + over.speculative; }
};

// Decode speedup of an oracle's cycles (an OracleWalk) over plain decoding of the same tokens: a cycle drafting m
// tokens costs c(m + 1) + a + b·m; m = 0 is a plain step.
double walk_speedup(const OracleWalk& w, const StepCost& step, double draft_fixed, double draft_per_node) {
  double plain = 0, oracle = 0;
  for (size_t c = 0; c < w.matched.size(); ++c) {
    const int32_t m = w.matched[c];
    for (int32_t t = 0; t <= m; ++t) plain += step.plain(w.cached[c] + t);
    oracle += m == 0 ? step.plain(w.cached[c]) : step.cycle(m + 1, w.cached[c]) + draft_fixed + draft_per_node * m;
  }
  return oracle > 0 ? plain / oracle : kNaN;
}

// The runs recorded with --oracle at temperature t, one row each, then per dataset with several the best of them
// per step.
Table oracle_table(const ResultsFile& results, const std::vector<RunBounds>& bounds, double t,
                   const BoundsOptions& options) {
  Table table;
  table.title = "Oracle draft length, temperature = " + temperature_text(t);
  table.columns = {"Dataset", "Method", "Positions", "Mean oracle length", "Drafting (m ≥ 1)", "τ", "τ (oracle walk)"};
  if (options.cost) table.columns.insert(table.columns.end(), {"Oracle-K bound", "Decode / oracle-K"});
  std::vector<std::pair<std::string, std::vector<const RunRecord*>>> by_dataset;  // in order of appearance
  for (size_t i = 0; i < results.runs.size(); ++i) {
    const RunRecord& run = results.runs[i];
    const RunBounds& b = bounds[i];
    if (run.temperature != t || is_baseline(run) || b.oracle_positions == 0) continue;
    auto group = std::find_if(by_dataset.begin(), by_dataset.end(), [&](const auto& g) { return g.first == run.dataset; });
    if (group == by_dataset.end()) group = by_dataset.insert(by_dataset.end(), {run.dataset, {}});
    group->second.push_back(&run);
    std::vector<Cell> row{run.dataset, run.method, std::to_string(b.oracle_positions),
                                 fixed(b.oracle_mean_matched, 2), fixed(100.0 * b.oracle_drafting_share, 0, "%"),
                                 fixed(b.tau, 2), fixed(b.oracle_tau, 2)};
    if (options.cost)
      row.insert(row.end(), {fixed(b.oracle_speedup, 2, "x"), fixed(b.decode_speedup / b.oracle_speedup, 2)});
    table.rows.push_back(row);
  }
  for (const auto& [dataset, runs] : by_dataset) {
    if (runs.size() < 2) continue;
    const OracleWalk walk = oracle_walk(*runs[0], best_of_matched(runs));
    std::vector<Cell> row{dataset, "best of " + std::to_string(runs.size()) + " per step",
                                 std::to_string(walk.positions), fixed(walk.mean_matched, 2),
                                 fixed(100.0 * walk.drafting_share, 0, "%"), "–", fixed(walk.tau(), 2)};
    if (options.cost) {
      const double free =
          walk_speedup(walk, StepCost{*options.cost, loop_overheads(results, *runs[0], *options.cost)}, 0.0, 0.0);
      row.insert(row.end(), {fixed(free, 2, "x") + " (drafting free)", "–"});
    }
    table.rows.push_back(row);
  }
  table.notes = {
      "With --oracle each method decoded every question once more committing one token per cycle; a position's "
      "oracle length m is what its draft from there got accepted: the draft length an oracle would choose (arXiv "
      "2601.11580). Drafting: positions with m ≥ 1. τ (oracle walk): cycles from position 0, each committing its "
      "m + 1 tokens: the run's own τ for a drafter that depends on the committed text alone (prompt lookup, a draft "
      "model), different where a drafter remembers (tries, n-gram pools, a head's cache). "
      "Oracle-K bound: the walk's cycles drafting exactly m tokens at the run's a + b·m and verifying m + 1 rows "
      "(m = 0: a plain step), loop overheads as above; decode / oracle-K: how much of it the run's own draft "
      "lengths reach. Best of N per step: the walk over the largest m of the dataset's methods at each position "
      "(a perfect selector of proposers), drafting free."};
  return table;
}

}  // namespace

RunBounds run_bounds(const ResultsFile& results, const RunRecord& run, const BoundsOptions& options) {
  RunBounds b;
  const SpeculationProfile profile = speculation_profile(run);
  b.tau = tau(run);
  b.value_tau = value_expected_tau(run);
  b.chain_tau = chain_formula_tau(profile.conditional);
  b.al_consistent = profile.consistent;
  int64_t drafted = 0;
  for (size_t c = 0; c < run.cycles.size(); ++c) drafted += run.cycles.drafted[c];
  b.mean_nodes = run.cycles.size() == 0 ? 0.0 : static_cast<double>(drafted) / static_cast<double>(run.cycles.size());
  const std::vector<AlphaCount> ranks = rank_acceptance(run, options.max_rank);
  for (const AlphaCount& r : ranks) b.rank_p.push_back(r.alpha());
  const OptimalTrees trees(acceptance_or_zero(ranks), options.max_nodes, options.max_depth);
  const int same_size = std::min(options.max_nodes, static_cast<int>(std::lround(b.mean_nodes)));
  b.sequoia_tau_same_size = is_baseline(run) ? kNaN : trees.expected_tau(same_size);

  b.measured_speedup = speedup(results, run);
  b.decode_speedup = b.free_drafting_speedup = kNaN;
  b.predicted_speedup = b.verify_model_error = b.sequoia_speedup = b.ceiling_speedup = kNaN;
  b.best_nodes = same_size;
  const std::vector<int64_t> cached = cached_at_cycles(run);
  double sum_cached = 0;
  for (int64_t k : cached) sum_cached += static_cast<double>(k);
  b.mean_cached = cached.empty() ? 0.0 : sum_cached / static_cast<double>(cached.size());
  const RunRecord* base = find_baseline(results, run);
  if (base != nullptr && base->cycles.size() > 0 && run.cycles.size() > 0) {
    // Decoding alone: time in cycles (drafting + verification) per token, baseline over run; the walls also hold
    // the prefill, which no drafter changes.
    const CycleTotals r = cycle_totals(run), p = cycle_totals(*base);
    b.decode_speedup = (p.seconds / p.tokens) / (r.seconds / r.tokens);
    b.free_drafting_speedup = (p.seconds / p.tokens) / (r.verify_seconds / r.tokens);
  }
  const OracleWalk walk = oracle_walk(run, oracle_matched(run));
  b.oracle_positions = walk.positions;
  b.oracle_mean_matched = walk.positions ? walk.mean_matched : kNaN;
  b.oracle_drafting_share = walk.positions ? walk.drafting_share : kNaN;
  b.oracle_tau = walk.tau();
  b.oracle_speedup = kNaN;
  if (options.cost == nullptr || run.cycles.size() == 0 || is_baseline(run)) return b;
  const CostModel& cost = *options.cost;
  const StepCost step{cost, loop_overheads(results, run, cost)};
  b.plain_overhead_seconds = step.over.plain;
  b.cycle_overhead_seconds = step.over.speculative;

  // The run's cycles as the cost model sees them: each verify forward of drafted + 1 rows with its recorded
  // drafting, against plain decoding of the same tokens.
  double predicted_verify = 0, measured_verify = 0, predicted_run = 0, predicted_plain = 0;
  for (size_t c = 0; c < run.cycles.size(); ++c) {
    const double v = step.cycle(run.cycles.drafted[c] + 1, cached[c]);
    predicted_verify += v;
    measured_verify += run.cycles.verify_seconds[c];
    predicted_run += v + run.cycles.draft_seconds[c];
    for (int32_t t = 0; t < run.cycles.accept_length[c]; ++t) predicted_plain += step.plain(cached[c] + t);
  }
  b.predicted_speedup = predicted_plain / predicted_run;
  b.verify_model_error = measured_verify > 0 ? predicted_verify / measured_verify - 1.0 : kNaN;

  const int64_t kv = std::llround(b.mean_cached);
  const double plain = step.plain(kv);
  std::tie(b.draft_fixed_seconds, b.draft_seconds_per_node) = fit_draft_cost(run);
  b.best_nodes = 0;
  b.sequoia_speedup = 1.0;  // n = 0: no drafting
  for (int n = 1; n <= options.max_nodes; ++n) {
    const double s = trees.expected_tau(n) * plain /
                     (step.cycle(n + 1, kv) + b.draft_fixed_seconds + b.draft_seconds_per_node * n);
    if (s > b.sequoia_speedup) b.sequoia_speedup = s, b.best_nodes = n;
  }
  b.ceiling_speedup = 1.0;
  b.ceiling_nodes = 0;
  for (int k = 1; k <= options.max_nodes; ++k) {
    const double s = (k + 1) * plain / step.cycle(k + 1, kv);
    if (s > b.ceiling_speedup) b.ceiling_speedup = s, b.ceiling_nodes = k;
  }
  if (walk.positions > 0)
    b.oracle_speedup = walk_speedup(walk, step, b.draft_fixed_seconds, b.draft_seconds_per_node);
  return b;
}

std::string sequoia_tree_json(const RunRecord& run, const RunBounds& bounds, const BoundsOptions& options) {
  // A tree file needs a path (tree_spec.h); when the best is not to draft there is no tree to run.
  if (bounds.best_nodes == 0)
    throw Error(describe_run(run) + ": Sequoia's best tree is empty (n* = 0: for this acceptance and cost no tree "
                "beats plain decoding), so there is no tree file to write");
  const OptimalTrees trees(acceptance_or_zero(rank_acceptance(run, options.max_rank)), options.max_nodes,
                           options.max_depth);
  nlohmann::ordered_json paths = trees.paths(bounds.best_nodes);
  char name[160];
  std::snprintf(name, sizeof name, "sequoia-%s-%s-n%d", run.method.c_str(), run.dataset.c_str(), bounds.best_nodes);
  nlohmann::ordered_json doc = {{"name", name},
                                {"expected_tau", trees.expected_tau(bounds.best_nodes)},
                                {"rank_acceptance", bounds.rank_p},
                                {"paths", paths}};
  // JSON has no NaN: a rank never tested is null.
  for (auto& p : doc["rank_acceptance"])
    if (p.is_number() && !std::isfinite(p.get<double>())) p = nullptr;
  return doc.dump() + "\n";
}

Report bounds_report(const ResultsFile& results, const std::string& source, const BoundsOptions& options) {
  Report report;
  report.heading = "Bounds: each run against what its recorded acceptance allows" +
                   std::string(options.cost ? " and this machine's forward cost" : "");
  report.caption = machine_caption(results) + (options.cost ? " Cost model: " + options.cost->source + " (" +
                                                                  options.cost->description + ")."
                                                            : "");
  const std::vector<double> temperatures = table_parts::sorted_temperatures(results);
  std::vector<RunBounds> bounds;
  for (const RunRecord& run : results.runs) bounds.push_back(run_bounds(results, run, options));

  for (double t : temperatures) {
    Table acceptance;
    acceptance.title = "Acceptance, temperature = " + temperature_text(t);
    acceptance.columns = {"Dataset", "Method", "Nodes", "τ", "τ (node values)", "τ (chain formula)",
                          "τ (Sequoia, same size)", "p rank 0", "p rank 1", "p rank 2", "AL check"};
    Table speed;
    speed.title = "Speed, temperature = " + temperature_text(t);
    speed.columns = {"Dataset", "Method", "Speedup", "Decode speedup", "Drafting free", "Predicted", "Verify model error",
                     "Loop overhead (ms)", "Draft a + b·n (ms)", "Sequoia bound (n*)", "Decode / bound", "Ceiling (K)"};
    for (size_t i = 0; i < results.runs.size(); ++i) {
      const RunRecord& run = results.runs[i];
      if (run.temperature != t || is_baseline(run)) continue;
      const RunBounds& b = bounds[i];
      auto rank = [&](size_t r) { return r < b.rank_p.size() ? fixed(b.rank_p[r], 3) : std::string("–"); };
      acceptance.rows.push_back({run.dataset, run.method, fixed(b.mean_nodes, 1), fixed(b.tau, 2), fixed(b.value_tau, 2),
                                 fixed(b.chain_tau, 2), fixed(b.sequoia_tau_same_size, 2), rank(0), rank(1), rank(2),
                                 b.al_consistent ? "ok" : "MISMATCH"});
      if (options.cost) {
        speed.rows.push_back({run.dataset, run.method, fixed(b.measured_speedup, 2, "x"), fixed(b.decode_speedup, 2, "x"),
                              fixed(b.free_drafting_speedup, 2, "x"),
                              fixed(b.predicted_speedup, 2, "x"), fixed(100.0 * b.verify_model_error, 1, "%"),
                              fixed(1e3 * b.plain_overhead_seconds, 3) + " / " + fixed(1e3 * b.cycle_overhead_seconds, 3),
                              fixed(1e3 * b.draft_fixed_seconds, 2) + " + " + fixed(1e3 * b.draft_seconds_per_node, 3) + "·n",
                              fixed(b.sequoia_speedup, 2, "x") + " (" + std::to_string(b.best_nodes) + ")",
                              fixed(b.decode_speedup / b.sequoia_speedup, 2),
                              fixed(b.ceiling_speedup, 2, "x") + " (" + std::to_string(b.ceiling_nodes) + ")"});
      }
    }
    if (acceptance.rows.empty()) continue;
    Table oracle = oracle_table(results, bounds, t, options);
    acceptance.notes = {
        "τ (node values): 1 + the mean sum of node values (product of confidences): what the draft expected. "
        "τ (chain formula): 1 + Σ_k Π_{i≤k} α_i over the per-depth conditional acceptance "
        "(`draftlab bounds --profile`). τ (Sequoia, same size): Sequoia's optimal tree with the run's mean node "
        "count for its per-rank acceptance p (tested nodes of each sibling rank, all depths pooled). "
        "AL check: SPEED-Bench's, the AL from nodes/accepted within 0.02 of the recorded accept lengths."};
    report.tables.push_back(std::move(acceptance));
    if (options.cost) {
      speed.notes = {
          "Speedup: over the walls (prefill included); decode speedup: over the time in cycles (drafting + "
          "verification); drafting free: over the verification time alone, measured through the engine (for a "
          "chain whose draft is the target itself, gamma K, the perfect-drafter ceiling at K). Predicted: the cost model's decode speedup for the recorded trees and draft times; "
          "verify model error: its verify seconds against the recorded ones. Loop overhead: what a step costs "
          "beyond the model's c(n) as this file recorded it, plain decoding / a speculative cycle (the baseline's "
          "mean verify time less c(1) / the median over the dataset's drafting runs of their mean verify time less "
          "c(drafted + 1): what the loop adds to a forward); every forward below pays it. "
          "Sequoia bound: the best n for the run's p under c(n + 1) + a + b·n at the run's mean cache length "
          "(n = 0, no drafting, gives 1.00x). Ceiling: every drafted token accepted and drafting free, "
          "max_K (K + 1)·c(1)/c(K + 1), up to " + std::to_string(options.max_nodes) + " nodes."};
      report.tables.push_back(std::move(speed));
    }
    if (!oracle.rows.empty()) report.tables.push_back(std::move(oracle));
  }
  if (report.tables.empty()) report.tables.push_back(table_parts::note_table(source + ": no run drafts anything"));
  return report;
}

}  // namespace draftlab::analysis
