// The speculation profile of a run, as SPEED-Bench reports one: per draft position k = 1..K (depth in the tree),
// the conditional acceptance (accepted at k given k - 1 accepted and something drafted at k) and the marginal
// acceptance (share of all cycles that accepted at least k draft tokens); the acceptance length (AL, tokens per
// cycle, bonus included) per step and per request; the AL rebuilt from the node table's accepted flags as a
// consistency check on the recorded accept lengths; the acceptance-length histogram, overall and per category;
// and SpecForge's simulated_acc_len (sum_k prod_{i<=k} conditional_i: the chain formula without the bonus token).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/table_format.h"
#include "core/results/results_file.h"

namespace draftlab::analysis {

struct SpeculationProfile {
  int positions = 0;                       // K: the deepest drafted node of the run
  std::vector<double> conditional;         // [K]; NaN where no cycle reached position k with a draft there
  std::vector<double> marginal;            // [K]: cycles that accepted >= k draft tokens / cycles
  int64_t cycles = 0;
  double al_per_step = 0;                  // mean accept_length over cycles (= tau)
  double al_per_request = 0;               // mean over question turns of each turn's mean accept_length
  double al_from_nodes = 0;                // 1 + sum_k (cycles with an accepted node at depth k) / cycles
  bool consistent = true;                  // |al_from_nodes - al_per_step| <= kAlTolerance
  double simulated_acc_len = 0;            // SpecForge's convention: no bonus token; NaN terms count as 0
  std::vector<int64_t> histogram;          // [K + 2]: cycles with accept_length = index (index 0 unused, always 0)
  std::map<std::string, std::vector<int64_t>> histogram_by_category;  // same, per questions/category
};

// SPEED-Bench's tolerance between the AL from marginals and the one measured per step.
inline constexpr double kAlTolerance = 0.02;

// The profile of one run. Throws Error naming the run where its tables disagree (a cycle's nodes out of range).
SpeculationProfile speculation_profile(const RunRecord& run);

// speculation_profile.json for every run of a results file: {"schema_version": "1.0", "source": ..., "runs": [...]}
// with one object per run (method, strategy, dataset, temperature and the fields above).
std::string speculation_profile_json(const ResultsFile& results, const std::string& source);

// The profiles of every drafting run as tables (`draftlab table --profile`), per temperature: AL per step and per
// request with simulated_acc_len and the AL check; conditional and marginal acceptance at positions 1..max_positions;
// the share of cycles per accept length 1..max_positions + 1 (longer ones in the last column).
std::vector<Table> speculation_profile_tables(const ResultsFile& results, int max_positions = 8);

// Where `draftlab exp --out FILE.h5` writes it: FILE.speculation_profile.json (FILE.h5 without its extension).
std::string speculation_profile_path(const std::string& results_path);

}  // namespace draftlab::analysis
