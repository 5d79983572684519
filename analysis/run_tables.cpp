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

std::vector<int8_t> parent_accepted(const RunRecord& run) {
  const NodeRows& nodes = run.nodes;
  const CycleRows& cycles = run.cycles;
  std::vector<int8_t> tested(nodes.size(), 0);
  std::unordered_map<int32_t, int8_t> accepted_by_index;  // tree_index -> accepted, within one cycle
  for (size_t c = 0; c < cycles.size(); ++c) {
    const int64_t begin = cycles.node_offset[c];
    const int64_t end = begin + cycles.drafted[c];
    if (begin < 0 || cycles.drafted[c] < 0 || end > static_cast<int64_t>(nodes.size()))
      throw Error(describe_run(run) + ": cycles/node_offset: expected the range of cycle " + std::to_string(c) +
                  " inside nodes/ (" + std::to_string(nodes.size()) + " rows), got [" + std::to_string(begin) +
                  ", " + std::to_string(end) + ")");
    accepted_by_index.clear();
    for (int64_t i = begin; i < end; ++i) {  // parents come before their children (flat tree order)
      const int32_t parent = nodes.parent[i];
      if (parent == 0) {
        tested[i] = 1;
      } else {
        const auto it = accepted_by_index.find(parent);
        if (it == accepted_by_index.end())
          throw Error(describe_run(run) + ": nodes/parent: expected the tree index of an earlier node of cycle " +
                      std::to_string(c) + " (or 0 = root), got " + std::to_string(parent) + " at row " +
                      std::to_string(i));
        tested[i] = it->second ? 1 : 0;
      }
      accepted_by_index[nodes.tree_index[i]] = nodes.accepted[i] ? 1 : 0;
    }
  }
  return tested;
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
