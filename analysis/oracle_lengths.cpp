#include "analysis/oracle_lengths.h"

#include <algorithm>
#include <limits>

#include "analysis/run_tables.h"
#include "core/base/error.h"

namespace draftlab::analysis {

std::vector<std::vector<int32_t>> oracle_matched(const RunRecord& run) {
  std::vector<std::vector<int32_t>> out(run.questions.size());
  const OracleRows& o = run.oracle;
  for (size_t k = 0; k < o.size(); ++k) {
    const auto q = static_cast<size_t>(o.question[k]);
    check(q < out.size(), [&] { return describe_run(run) + ": oracle/question[" + std::to_string(k) + "] out of range"; });
    out[q].push_back(o.matched[k]);
  }
  return out;
}

double OracleWalk::tau() const {
  if (accept_lengths.empty()) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (int32_t a : accept_lengths) sum += a;
  return sum / static_cast<double>(accept_lengths.size());
}

OracleWalk oracle_walk(const RunRecord& run, const std::vector<std::vector<int32_t>>& matched) {
  OracleWalk w;
  int64_t drafting = 0, sum = 0;
  for (size_t q = 0; q < matched.size(); ++q) {
    const std::vector<int32_t>& m = matched[q];
    for (int32_t x : m) sum += x, drafting += x > 0 ? 1 : 0;
    w.positions += static_cast<int64_t>(m.size());
    // A cycle at every position the walk reaches: the oracle table has one for each root a decode can start from.
    for (size_t t = 0; t < m.size(); t += static_cast<size_t>(m[t]) + 1) {
      w.accept_lengths.push_back(m[t] + 1);
      w.matched.push_back(m[t]);
      w.cached.push_back(run.questions.prompt_tokens[q] + static_cast<int64_t>(t));
    }
  }
  if (w.positions > 0) {
    w.mean_matched = static_cast<double>(sum) / static_cast<double>(w.positions);
    w.drafting_share = static_cast<double>(drafting) / static_cast<double>(w.positions);
  }
  return w;
}

std::vector<std::vector<int32_t>> best_of_matched(const std::vector<const RunRecord*>& runs) {
  check(!runs.empty(), "best of proposers: no runs");
  const RunRecord& first = *runs[0];
  std::vector<std::vector<int32_t>> best = oracle_matched(first);
  for (size_t i = 1; i < runs.size(); ++i) {
    const RunRecord& r = *runs[i];
    const QuestionRows &a = first.questions, &b = r.questions;
    bool same = a.size() == b.size();
    for (size_t q = 0; same && q < a.size(); ++q)
      same = a.question_id[q] == b.question_id[q] && a.turn[q] == b.turn[q] && a.prompt_tokens[q] == b.prompt_tokens[q];
    if (!same)
      throw Error("best of proposers: " + describe_run(first) + " and " + describe_run(r) +
                  " did not decode the same questions (ids, turns, prompt lengths)");
    const std::vector<std::vector<int32_t>> m = oracle_matched(r);
    for (size_t q = 0; q < best.size(); ++q) {
      if (m[q].size() != best[q].size())
        throw Error("best of proposers: " + describe_run(first) + " and " + describe_run(r) + ": question row " +
                    std::to_string(q) + " has " + std::to_string(best[q].size()) + " and " +
                    std::to_string(m[q].size()) + " oracle positions (different answers)");
      for (size_t t = 0; t < m[q].size(); ++t) best[q][t] = std::max(best[q][t], m[q][t]);
    }
  }
  return best;
}

}  // namespace draftlab::analysis
