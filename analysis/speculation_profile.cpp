#include "analysis/speculation_profile.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "analysis/paper_table_parts.h"
#include "analysis/run_metrics.h"
#include "analysis/run_tables.h"
#include "core/base/error.h"

namespace draftlab::analysis {

namespace {

double ratio(int64_t num, int64_t den) {
  return den == 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(num) / static_cast<double>(den);
}

// JSON has no NaN: a rate nothing was counted for is null.
nlohmann::ordered_json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

}  // namespace

SpeculationProfile speculation_profile(const RunRecord& run) {
  const CycleRows& cycles = run.cycles;
  const NodeRows& nodes = run.nodes;
  SpeculationProfile p;
  p.cycles = static_cast<int64_t>(cycles.size());
  // Per cycle: accepted draft tokens (a), deepest drafted node (d), deepest accepted node (from nodes/).
  std::vector<int32_t> accepted(cycles.size()), deepest(cycles.size(), 0), deepest_accepted(cycles.size(), 0);
  for (size_t c = 0; c < cycles.size(); ++c) {
    const auto [begin, end] = cycle_nodes(run, c);
    if (cycles.accept_length[c] < 1)
      throw Error(describe_run(run) + ": cycles/accept_length: expected >= 1 (the bonus token), got " +
                  std::to_string(cycles.accept_length[c]) + " at row " + std::to_string(c));
    accepted[c] = cycles.accept_length[c] - 1;
    for (int64_t i = begin; i < end; ++i) {
      deepest[c] = std::max(deepest[c], nodes.depth[i]);
      if (nodes.accepted[i]) deepest_accepted[c] = std::max(deepest_accepted[c], nodes.depth[i]);
    }
    p.positions = std::max({p.positions, deepest[c], accepted[c]});
  }
  const int K = p.positions;
  std::vector<int64_t> reached_and_drafted(K + 1, 0), at_least(K + 1, 0), node_at_least(K + 1, 0);
  p.histogram.assign(K + 2, 0);
  double sum_length = 0;
  for (size_t c = 0; c < cycles.size(); ++c) {
    sum_length += cycles.accept_length[c];
    p.histogram[cycles.accept_length[c]] += 1;
    for (int k = 1; k <= K; ++k) {
      if (accepted[c] >= k - 1 && deepest[c] >= k) reached_and_drafted[k] += 1;
      if (accepted[c] >= k) at_least[k] += 1;
      if (deepest_accepted[c] >= k) node_at_least[k] += 1;
    }
  }
  p.conditional.resize(K);
  p.marginal.resize(K);
  double node_sum = 0, survive = 1;
  for (int k = 1; k <= K; ++k) {
    p.conditional[k - 1] = ratio(at_least[k], reached_and_drafted[k]);
    p.marginal[k - 1] = ratio(at_least[k], p.cycles);
    node_sum += ratio(node_at_least[k], p.cycles);
    survive *= std::isfinite(p.conditional[k - 1]) ? p.conditional[k - 1] : 0.0;
    p.simulated_acc_len += survive;
  }
  p.al_per_step = ratio(static_cast<int64_t>(sum_length), p.cycles);
  p.al_from_nodes = p.cycles == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 + node_sum;
  p.consistent = p.cycles == 0 || std::fabs(p.al_from_nodes - p.al_per_step) <= kAlTolerance;

  // Per request (question turn) and per category.
  const QuestionRows& questions = run.questions;
  double sum_means = 0;
  int64_t turns = 0;
  for (size_t q = 0; q < questions.size(); ++q) {
    const auto [begin, end] = question_cycles(run, q);
    const int64_t n = end - begin;
    if (n == 0) continue;
    std::vector<int64_t>& hist = p.histogram_by_category[questions.category[q]];
    hist.resize(K + 2, 0);
    double s = 0;
    for (int64_t c = begin; c < end; ++c) {
      s += cycles.accept_length[c];
      hist[cycles.accept_length[c]] += 1;
    }
    sum_means += s / static_cast<double>(n);
    turns += 1;
  }
  p.al_per_request = turns == 0 ? std::numeric_limits<double>::quiet_NaN() : sum_means / static_cast<double>(turns);
  return p;
}

std::string speculation_profile_json(const ResultsFile& results, const std::string& source) {
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  for (const RunRecord& run : results.runs) {
    const SpeculationProfile p = speculation_profile(run);
    nlohmann::ordered_json conditional = nlohmann::ordered_json::array(), marginal = nlohmann::ordered_json::array();
    for (int k = 0; k < p.positions; ++k) {
      conditional.push_back(number_or_null(p.conditional[k]));
      marginal.push_back(number_or_null(p.marginal[k]));
    }
    auto histogram = [](const std::vector<int64_t>& h) {
      nlohmann::ordered_json o = nlohmann::ordered_json::object();
      for (size_t length = 1; length < h.size(); ++length) o[std::to_string(length)] = h[length];
      return o;
    };
    nlohmann::ordered_json by_category = nlohmann::ordered_json::object();
    for (const auto& [category, h] : p.histogram_by_category) by_category[category] = histogram(h);
    runs.push_back({{"method", run.method},
                    {"strategy", run.strategy},
                    {"draft_shape", run.draft_shape},
                    {"dataset", run.dataset},
                    {"temperature", run.temperature},
                    {"cycles", p.cycles},
                    {"positions", p.positions},
                    {"conditional_acceptance", conditional},
                    {"marginal_acceptance", marginal},
                    {"acceptance_length",
                     {{"per_step", number_or_null(p.al_per_step)},
                      {"per_request", number_or_null(p.al_per_request)},
                      {"from_marginals", number_or_null(p.al_from_nodes)},
                      {"tolerance", kAlTolerance},
                      {"consistent", p.consistent}}},
                    {"simulated_acc_len", p.simulated_acc_len},
                    {"acceptance_length_histogram", histogram(p.histogram)},
                    {"acceptance_length_histogram_by_category", by_category}});
  }
  nlohmann::ordered_json doc = {
      {"schema_version", "1.0"},
      {"source", source},
      {"definitions",
       "position k = depth k of the draft tree; conditional_acceptance[k-1] = cycles accepting >= k draft tokens / "
       "cycles accepting >= k-1 with a node drafted at depth k; marginal_acceptance[k-1] = cycles accepting >= k / "
       "cycles; acceptance lengths count the bonus token; from_marginals = 1 + sum over k of the share of cycles "
       "with an accepted node at depth k (nodes/accepted), checked against per_step within tolerance; "
       "simulated_acc_len = sum_k prod_{i<=k} conditional_i (SpecForge, no bonus token)"},
      {"runs", runs}};
  return doc.dump(2) + "\n";
}

std::string speculation_profile_path(const std::string& results_path) {
  const size_t slash = results_path.find_last_of('/');
  const size_t dot = results_path.find_last_of('.');
  const bool has_extension = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  return (has_extension ? results_path.substr(0, dot) : results_path) + ".speculation_profile.json";
}

std::vector<Table> speculation_profile_tables(const ResultsFile& results, int max_positions) {
  using table_parts::fixed;
  std::vector<Table> out;
  for (double t : table_parts::sorted_temperatures(results)) {
    const std::string at = ", temperature = " + table_parts::temperature_text(t);
    Table lengths, conditional, marginal, histogram;
    lengths.title = "Speculation profile: acceptance length" + at;
    lengths.columns = {"Dataset", "Method", "Cycles", "AL per step", "AL per request", "AL from nodes", "AL check",
                       "simulated_acc_len"};
    conditional.title = "Conditional acceptance per position" + at;
    marginal.title = "Marginal acceptance per position" + at;
    histogram.title = "Cycles per acceptance length (%)" + at;
    conditional.columns = marginal.columns = histogram.columns = {"Dataset", "Method"};
    for (int k = 1; k <= max_positions; ++k) {
      conditional.columns.push_back(std::to_string(k));
      marginal.columns.push_back(std::to_string(k));
    }
    for (int length = 1; length <= max_positions + 1; ++length)
      histogram.columns.push_back(std::to_string(length) + (length == max_positions + 1 ? "+" : ""));
    for (const RunRecord& run : results.runs) {
      if (run.temperature != t || is_baseline(run)) continue;
      const SpeculationProfile p = speculation_profile(run);
      lengths.rows.push_back({run.dataset, run.method, std::to_string(p.cycles), fixed(p.al_per_step, 2),
                              fixed(p.al_per_request, 2), fixed(p.al_from_nodes, 2), p.consistent ? "ok" : "MISMATCH",
                              fixed(p.simulated_acc_len, 2)});
      std::vector<Cell> c{run.dataset, run.method}, m{run.dataset, run.method}, h{run.dataset, run.method};
      for (int k = 1; k <= max_positions; ++k) {
        c.push_back(k <= p.positions ? fixed(p.conditional[k - 1], 3) : std::string("–"));
        m.push_back(k <= p.positions ? fixed(p.marginal[k - 1], 3) : std::string("–"));
      }
      for (int length = 1; length <= max_positions + 1; ++length) {
        int64_t n = 0;  // the last column gathers every longer length
        const size_t last = length <= max_positions ? static_cast<size_t>(length) + 1 : p.histogram.size();
        for (size_t l = static_cast<size_t>(length); l < std::min(last, p.histogram.size()); ++l) n += p.histogram[l];
        h.push_back(fixed(p.cycles ? 100.0 * static_cast<double>(n) / static_cast<double>(p.cycles) : NAN, 1));
      }
      conditional.rows.push_back(std::move(c));
      marginal.rows.push_back(std::move(m));
      histogram.rows.push_back(std::move(h));
    }
    if (lengths.rows.empty()) continue;
    lengths.notes = {"SPEED-Bench's profile (analysis/speculation_profile.h): AL counts the bonus token; AL from "
                     "nodes = 1 + Σ_k the share of cycles with an accepted node at depth k, checked within 0.02 of "
                     "the recorded accept lengths; simulated_acc_len = Σ_k Π_{i≤k} conditional_i, SpecForge's, "
                     "without the bonus token. Position k = depth k of the draft tree."};
    for (Table* table : {&lengths, &conditional, &marginal, &histogram}) out.push_back(std::move(*table));
  }
  return out;
}

}  // namespace draftlab::analysis
