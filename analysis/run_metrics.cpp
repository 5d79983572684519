#include "analysis/run_metrics.h"

#include <Eigen/Core>

#include <limits>
#include <map>
#include <utility>

#include "analysis/run_tables.h"
#include "core/base/error.h"

namespace draftlab::analysis {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Per question of the run: tokens emitted by its cycles, and its number of cycles.
std::pair<Eigen::VectorXd, Eigen::VectorXd> emitted_and_cycles(const RunRecord& run) {
  const auto nq = static_cast<Eigen::Index>(run.questions.size());
  Eigen::VectorXd emitted = Eigen::VectorXd::Zero(nq), cycles = Eigen::VectorXd::Zero(nq);
  for (size_t c = 0; c < run.cycles.size(); ++c) {
    const int32_t qi = run.cycles.question[c];
    if (qi < 0 || qi >= nq)
      throw Error(describe_run(run) + ": cycles/question: expected a row of questions/ (< " + std::to_string(nq) +
                  "), got " + std::to_string(qi) + " at row " + std::to_string(c));
    emitted[qi] += run.cycles.accept_length[c];
    cycles[qi] += 1;
  }
  return {emitted, cycles};
}

// Wall seconds of the baseline and of the run on the question turns both have, in the run's order.
std::pair<Eigen::VectorXd, Eigen::VectorXd> paired_wall_seconds(const ResultsFile& results, const RunRecord& run) {
  const RunRecord* baseline = find_baseline(results, run);
  if (!baseline) return {};
  const QuestionRows& b = baseline->questions;
  std::map<std::pair<int64_t, int32_t>, double> baseline_wall;
  for (size_t i = 0; i < b.size(); ++i) baseline_wall[{b.question_id[i], b.turn[i]}] = b.wall_seconds[i];
  std::vector<double> base, mine;
  const QuestionRows& q = run.questions;
  for (size_t i = 0; i < q.size(); ++i) {
    const auto it = baseline_wall.find({q.question_id[i], q.turn[i]});
    if (it == baseline_wall.end()) continue;
    base.push_back(it->second);
    mine.push_back(q.wall_seconds[i]);
  }
  const auto n = static_cast<Eigen::Index>(base.size());
  return {Eigen::Map<Eigen::VectorXd>(base.data(), n), Eigen::Map<Eigen::VectorXd>(mine.data(), n)};
}

double ratio_of_sums(const Eigen::VectorXd& numerator, const Eigen::VectorXd& denominator) {
  return numerator.size() == 0 ? kNaN : numerator.sum() / denominator.sum();
}

}  // namespace

bool is_baseline(const RunRecord& run) { return run.draft_shape == draft_shapes::none; }

const RunRecord* find_baseline(const ResultsFile& results, const RunRecord& run) {
  for (const RunRecord& r : results.runs)
    if (is_baseline(r) && r.dataset == run.dataset && r.temperature == run.temperature && r.shard == run.shard &&
        r.batch_size == run.batch_size)
      return &r;
  return nullptr;
}

double tau(const RunRecord& run) {
  const auto [emitted, cycles] = emitted_and_cycles(run);
  return cycles.sum() > 0 ? emitted.sum() / cycles.sum() : kNaN;
}

double tokens_per_second(const RunRecord& run) {
  double tokens = 0, seconds = 0;
  for (size_t i = 0; i < run.questions.size(); ++i) {
    tokens += run.questions.new_tokens[i];
    seconds += run.questions.wall_seconds[i];
  }
  return seconds > 0 ? tokens / seconds : 0.0;
}

Estimate tau_estimate(const RunRecord& run, const BootstrapOptions& options) {
  const auto [emitted, cycles] = emitted_and_cycles(run);
  return bootstrap_ratio(emitted, cycles, options);
}

double speedup(const ResultsFile& results, const RunRecord& run) {
  const auto [base, mine] = paired_wall_seconds(results, run);
  return ratio_of_sums(base, mine);
}

Estimate speedup_estimate(const ResultsFile& results, const RunRecord& run, const BootstrapOptions& options) {
  const auto [base, mine] = paired_wall_seconds(results, run);
  return bootstrap_ratio(base, mine, options);
}

RunSummary summarize_run(const ResultsFile& results, const RunRecord& run, const BootstrapOptions& options) {
  const QuestionRows& q = run.questions;
  RunSummary s;
  s.is_baseline = is_baseline(run);
  s.questions = static_cast<int64_t>(q.size());
  s.tau = tau_estimate(run, options);
  s.speedup = speedup_estimate(results, run, options);
  for (size_t i = 0; i < q.size(); ++i) {
    if (q.identical[i] != -1) ++s.checked;
    if (q.identical[i] == 1) ++s.identical;
  }
  s.tokens_per_second = tokens_per_second(run);
  return s;
}

}  // namespace draftlab::analysis
