// Spec-Bench answer files: the runs of a results file in the JSONL layout Spec-Bench's evaluation loop writes to
// model_answer/ (one line per question: turns, decoding_steps, new_tokens and wall_time per turn, accept_lengths
// one flat list over the question's turns), so its evaluation/speed.py and equal.py read our answers as they are.
#pragma once

#include <string>
#include <vector>

#include "core/results/results_file.h"

namespace draftlab {

// The lines of one run: one JSON object per question_id (in the order of first appearance), its turns in order.
std::vector<std::string> spec_bench_lines(const RunRecord& run, double timestamp);

// The file of a run under dir, named as Spec-Bench names its model ids:
// <dataset>/<model>-<method>-<dtype>-temp-<T>.jsonl, T with one decimal at least ("0.0", "0.7"); model = the
// target's folder name (root attribute models), dtype = the root attribute dtype. Characters other than letters,
// digits, '.', '-' and '_' become '_'. Relative to dir.
std::string spec_bench_file_name(const ResultsFile& results, const RunRecord& run);

// Writes every run's file under dir (created as needed), each atomically. Throws Error naming the file, and when
// two runs map to the same file.
void write_spec_bench_jsonl(const ResultsFile& results, const std::string& dir, double timestamp);

}  // namespace draftlab
