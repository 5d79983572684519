// Spec-Bench answer files (model_answer/*.jsonl, ours from `exp --jsonl` or another system's) read back and tabled
// the way Spec-Bench's evaluation/speed.py reports them: per subtask and overall, speed = mean over questions of
// sum(new_tokens) / sum(wall_time), speedup = a file's speed / its baseline's, mean accepted tokens = the mean of
// every accept_lengths value. So answers produced elsewhere can be tabled beside ours.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/by_category.h"
#include "analysis/table_format.h"

namespace draftlab::analysis {

struct AnswerQuestion {
  int64_t question_id = 0;
  std::string category;
  double new_tokens = 0, wall_time = 0;  // summed over turns
  std::vector<double> accept_lengths;   // flat over turns
  std::vector<std::string> turns;
};

struct AnswerFile {
  std::string path;     // relative to the folder read
  std::string dataset;  // its sub-folder ("" at the top)
  std::string method;   // the file name without .jsonl (Spec-Bench's model id)
  double temperature = 0;  // from "-temp-<T>" in the name, else 0
  std::vector<AnswerQuestion> questions;
};

// Every *.jsonl under dir (sorted by path). Throws Error naming the file, the line and the field for a line that
// is not a Spec-Bench answer (question_id, choices[0] with turns, new_tokens, wall_time).
std::vector<AnswerFile> read_answer_folder(const std::string& dir);

// One table per temperature: a row per file, Speedup and τ (mean accepted tokens) per subtask and overall, against
// the file of the same folder and temperature whose name contains `baseline`. Subtasks as category_key() makes
// them for `grouping` (File: one column per folder).
Report spec_bench_report(const std::vector<AnswerFile>& files, const std::string& baseline, CategoryGrouping grouping,
                         const std::string& source);

}  // namespace draftlab::analysis
