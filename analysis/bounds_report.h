// `draftlab bounds`: how close each run of a results file is to what its own recorded acceptance allows, and,
// given this machine's forward cost (cost_model.h), to the fastest a drafter could be here.
//
// Per run (one row each, grouped by temperature):
//   acceptance: measured τ; τ the draft expected (node values); τ by the chain formula over the per-position
//     conditional acceptance; Sequoia's optimal tree of the run's mean size for its per-rank acceptance; the
//     acceptance of ranks 0-2; SPEED-Bench's AL consistency check (speculation_profile.h).
//   speed (with a cost model): measured speedup (walls) and decode speedup (time in cycles, no prefill); the
//     cost model's prediction of the decode speedup from the recorded trees and draft times, and its error on the
//     recorded verify times; Sequoia's bound: the best tree size n* for the run's acceptance, paying c(n + 1)
//     plus the run's fitted draft cost a + b·n, "no drafting" (n = 0, 1.00x) included; decode / bound; the
//     perfect-drafter ceiling max_K (K + 1)·c(1)/c(K + 1) (every drafted token accepted, drafting free). Every
//     forward also pays the loop's overhead as the file's runs recorded it (loop_overheads in the .cpp).
//   oracle draft length (runs recorded with --oracle; oracle_lengths.h): the mean oracle length m over every
//     position, the walk's τ, and with a cost model the oracle-K bound: the walk's cycles drafting exactly m tokens
//     (the run's a + b·m) and verifying m + 1 rows, m = 0 a plain step. Per dataset, the best of the proposers
//     per step: the walk over their position-wise maximum, drafting free.
#pragma once

#include <string>
#include <vector>

#include "analysis/cost_model.h"
#include "analysis/table_format.h"
#include "core/results/results_file.h"

namespace draftlab::analysis {

struct BoundsOptions {
  int max_nodes = 64;   // largest tree Sequoia's program and the ceiling consider
  int max_depth = 12;   // deepest tree it considers
  int max_rank = 7;     // sibling ranks measured (0 .. max_rank)
  const CostModel* cost = nullptr;
};

// Everything the report prints about one run, for tests and other tables.
struct RunBounds {
  double tau = 0, value_tau = 0, chain_tau = 0;
  double mean_nodes = 0;                 // drafted nodes per cycle
  double sequoia_tau_same_size = 0;      // Sequoia's tree with round(mean_nodes) nodes
  std::vector<double> rank_p;            // acceptance per sibling rank (NaN: never tested)
  bool al_consistent = true;
  double mean_cached = 0;                // mean tokens in the cache at a cycle's start
  double measured_speedup = 0;           // speedup() against the file's baseline run (walls: prefill included)
  double decode_speedup = 0;             // the same over the time in cycles only (drafting + verification)
  double free_drafting_speedup = 0;      // the same over the verification time alone (as if drafting were free)
  // With a cost model (NaN without):
  double predicted_speedup = 0;          // the model's decode speedup for the recorded trees and draft times
  double verify_model_error = 0;         // modelled verify seconds / recorded - 1
  double plain_overhead_seconds = 0;     // plain decoding's step beyond c(1) (loop_overheads)
  double cycle_overhead_seconds = 0;     // a speculative cycle's beyond c(n + 1)
  double draft_fixed_seconds = 0, draft_seconds_per_node = 0;  // least squares over the run's cycles, >= 0
  int best_nodes = 0;                    // Sequoia's n*
  double sequoia_speedup = 0;            // its predicted speedup
  int ceiling_nodes = 0;                 // K of the perfect-drafter ceiling
  double ceiling_speedup = 0;
  // With an oracle table (oracle_lengths.h; positions 0 and NaN without):
  int64_t oracle_positions = 0;
  double oracle_mean_matched = 0;        // mean oracle draft length over every position
  double oracle_drafting_share = 0;      // positions where it is >= 1
  double oracle_tau = 0;                 // the walk's τ
  double oracle_speedup = 0;             // cost model: the walk at the run's draft cost (NaN without a cost model)
};

RunBounds run_bounds(const ResultsFile& results, const RunRecord& run, const BoundsOptions& options);

// Sequoia's best tree for a run (n* with a cost model, else round(mean_nodes)) as data/trees/*.json text, so that
// `-s static-tree:tree=FILE` runs it. Throws Error naming the run when that tree is empty (n* = 0).
std::string sequoia_tree_json(const RunRecord& run, const RunBounds& bounds, const BoundsOptions& options);

Report bounds_report(const ResultsFile& results, const std::string& source, const BoundsOptions& options);

}  // namespace draftlab::analysis
