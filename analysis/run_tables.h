// Walking the three tables of one run (questions/ -> cycles/ -> nodes/) as docs/results-schema.md links them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/results/results_file.h"

namespace draftlab::analysis {

// "run eagle2 on mt_bench at T=0": the prefix of every error about a run.
std::string describe_run(const RunRecord& run);

// [begin, end) of cycle c's rows in nodes/, and of question row q's rows in cycles/. Throw Error naming the run
// when the recorded offsets point outside the table.
std::pair<int64_t, int64_t> cycle_nodes(const RunRecord& run, size_t c);
std::pair<int64_t, int64_t> question_cycles(const RunRecord& run, size_t q);

// Walks every cycle's tree from the root down: value(i, v) gives node i's value from its parent's value v (the
// root's is root_value). Returns, for every row of nodes/, its parent's value. Throws Error naming the run when a
// cycle's node range is out of bounds or a parent index is not a node of the same cycle.
std::vector<int8_t> parent_values(const RunRecord& run, int8_t root_value,
                                  const std::function<int8_t(size_t node, int8_t parent_value)>& value);

// For every row of nodes/: 1 when the verifier tested the node, i.e. its parent is the root or was accepted in
// the same cycle (a node under a rejected parent was never compared with the target). Throws as parent_values.
std::vector<int8_t> parent_accepted(const RunRecord& run);

// For every row of nodes/: the row in questions/ its cycle belongs to (through cycles/question). Throws Error
// naming the run on an out-of-range cycle or question index.
std::vector<int32_t> node_questions(const RunRecord& run);

}  // namespace draftlab::analysis
