#include "analysis/run_tables.h"

#include <sstream>
#include <unordered_map>

#include "core/base/error.h"

namespace draftlab::analysis {

std::string describe_run(const RunRecord& run) {
  std::ostringstream s;
  s << "run " << run.method << " on " << run.dataset << " at T=" << run.temperature;
  return s.str();
}

std::pair<int64_t, int64_t> cycle_nodes(const RunRecord& run, size_t c) {
  const int64_t begin = run.cycles.node_offset[c];
  const int64_t end = begin + run.cycles.drafted[c];
  if (begin < 0 || run.cycles.drafted[c] < 0 || end > static_cast<int64_t>(run.nodes.size()))
    throw Error(describe_run(run) + ": cycles/node_offset: expected the range of cycle " + std::to_string(c) +
                " inside nodes/ (" + std::to_string(run.nodes.size()) + " rows), got [" + std::to_string(begin) +
                ", " + std::to_string(end) + ")");
  return {begin, end};
}

std::pair<int64_t, int64_t> question_cycles(const RunRecord& run, size_t q) {
  const int64_t begin = run.questions.cycle_offset[q];
  const int64_t end = begin + run.questions.cycles[q];
  if (begin < 0 || run.questions.cycles[q] < 0 || end > static_cast<int64_t>(run.cycles.size()))
    throw Error(describe_run(run) + ": questions/cycle_offset: expected the cycles of question row " +
                std::to_string(q) + " inside cycles/ (" + std::to_string(run.cycles.size()) + " rows), got [" +
                std::to_string(begin) + ", " + std::to_string(end) + ")");
  return {begin, end};
}

std::vector<int8_t> parent_values(const RunRecord& run, int8_t root_value,
                                  const std::function<int8_t(size_t node, int8_t parent_value)>& value) {
  const NodeRows& nodes = run.nodes;
  const CycleRows& cycles = run.cycles;
  std::vector<int8_t> of_parent(nodes.size(), 0);
  std::unordered_map<int32_t, int8_t> value_by_index;  // tree_index -> value, within one cycle
  for (size_t c = 0; c < cycles.size(); ++c) {
    const auto [begin, end] = cycle_nodes(run, c);
    value_by_index.clear();
    value_by_index[0] = root_value;
    for (int64_t i = begin; i < end; ++i) {  // parents come before their children (flat tree order)
      const int32_t parent = nodes.parent[i];
      const auto it = value_by_index.find(parent);
      if (it == value_by_index.end())
        throw Error(describe_run(run) + ": nodes/parent: expected the tree index of an earlier node of cycle " +
                    std::to_string(c) + " (or 0 = root), got " + std::to_string(parent) + " at row " +
                    std::to_string(i));
      of_parent[i] = it->second;
      value_by_index[nodes.tree_index[i]] = value(static_cast<size_t>(i), it->second);
    }
  }
  return of_parent;
}

std::vector<int8_t> parent_accepted(const RunRecord& run) {
  return parent_values(run, 1,
                       [&](size_t i, int8_t) { return static_cast<int8_t>(run.nodes.accepted[i] ? 1 : 0); });
}

std::vector<int32_t> node_questions(const RunRecord& run) {
  std::vector<int32_t> out(run.nodes.size());
  for (size_t i = 0; i < run.nodes.size(); ++i) {
    const int64_t c = run.nodes.cycle[i];
    if (c < 0 || c >= static_cast<int64_t>(run.cycles.size()))
      throw Error(describe_run(run) + ": nodes/cycle: expected a row of cycles/ (< " +
                  std::to_string(run.cycles.size()) + "), got " + std::to_string(c) + " at row " + std::to_string(i));
    const int32_t q = run.cycles.question[c];
    if (q < 0 || q >= static_cast<int32_t>(run.questions.size()))
      throw Error(describe_run(run) + ": cycles/question: expected a row of questions/ (< " +
                  std::to_string(run.questions.size()) + "), got " + std::to_string(q) + " at row " + std::to_string(c));
    out[i] = q;
  }
  return out;
}

}  // namespace draftlab::analysis
