#include "analysis/run_metrics.h"

#include <Eigen/Core>

#include <limits>
#include <map>
#include <utility>

#include "analysis/run_tables.h"
#include "core/base/error.h"

namespace draftlab::analysis {

const RunRecord* find_vanilla(const ResultsFile& results, const RunRecord& run) {
  for (const RunRecord& r : results.runs)
    if (r.strategy == "vanilla" && r.dataset == run.dataset && r.temperature == run.temperature &&
        r.shard == run.shard)
      return &r;
  return nullptr;
}

RunSummary summarize_run(const ResultsFile& results, const RunRecord& run, const BootstrapOptions& options) {
  const QuestionRows& q = run.questions;
  const auto nq = static_cast<Eigen::Index>(q.size());
  RunSummary s;
  s.is_vanilla = run.strategy == "vanilla";
  s.questions = nq;

  // tau: per question, tokens emitted by its cycles and the number of cycles.
  Eigen::VectorXd emitted = Eigen::VectorXd::Zero(nq), cycles = Eigen::VectorXd::Zero(nq);
  for (size_t c = 0; c < run.cycles.size(); ++c) {
    const int32_t qi = run.cycles.question[c];
    if (qi < 0 || qi >= nq)
      throw Error(describe_run(run) + ": cycles/question: expected a row of questions/ (< " + std::to_string(nq) +
                  "), got " + std::to_string(qi) + " at row " + std::to_string(c));
    emitted[qi] += run.cycles.accept_length[c];
    cycles[qi] += 1;
  }
  s.tau = bootstrap_ratio(emitted, cycles, options);

  double tokens = 0, seconds = 0;
  for (Eigen::Index i = 0; i < nq; ++i) {
    tokens += q.new_tokens[i];
    seconds += q.wall_seconds[i];
    if (q.identical[i] != -1) ++s.checked;
    if (q.identical[i] == 1) ++s.identical;
  }
  s.tokens_per_second = seconds > 0 ? tokens / seconds : std::numeric_limits<double>::quiet_NaN();

  // speedup: paired by (question_id, turn) with the vanilla run, resampling the pairs.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  s.speedup = {nan, nan, nan};
  if (const RunRecord* vanilla = find_vanilla(results, run)) {
    std::map<std::pair<int64_t, int32_t>, double> vanilla_wall;
    for (size_t i = 0; i < vanilla->questions.size(); ++i)
      vanilla_wall[{vanilla->questions.question_id[i], vanilla->questions.turn[i]}] =
          vanilla->questions.wall_seconds[i];
    std::vector<double> base, mine;
    for (Eigen::Index i = 0; i < nq; ++i) {
      const auto it = vanilla_wall.find({q.question_id[i], q.turn[i]});
      if (it == vanilla_wall.end()) continue;
      base.push_back(it->second);
      mine.push_back(q.wall_seconds[i]);
    }
    if (!base.empty())
      s.speedup = bootstrap_ratio(Eigen::Map<Eigen::VectorXd>(base.data(), static_cast<Eigen::Index>(base.size())),
                                  Eigen::Map<Eigen::VectorXd>(mine.data(), static_cast<Eigen::Index>(mine.size())),
                                  options);
  }
  return s;
}

}  // namespace draftlab::analysis
