// Spec-Bench answer files: the runs of a results file in the JSONL layout of Spec-Bench's model_answer files
// (one line per question: turns, decoding_steps, new_tokens, wall_time, accept_lengths), so its tools can read
// our answers and timings.
#pragma once

#include <string>
#include <vector>

#include "core/results/results_file.h"

namespace draftlab {

// The lines of one run: one JSON object per question_id (in the order of first appearance), its turns in order.
std::vector<std::string> spec_bench_lines(const RunRecord& run, double timestamp);

// The file of a run under dir: <dataset>/<method>.jsonl at T = 0, <dataset>/<method>-T<temperature>.jsonl else;
// characters other than letters, digits, '.', '-' and '_' in the method label become '_'. Relative to dir.
std::string spec_bench_file_name(const RunRecord& run);

// Writes every run's file under dir (created as needed), each atomically. Throws Error naming the file, and when
// two runs map to the same file.
void write_spec_bench_jsonl(const ResultsFile& results, const std::string& dir, double timestamp);

}  // namespace draftlab
