// Bench questions: the Spec-Bench / MT-bench question files (one JSON object per line with question_id,
// category and turns) that the experiment drivers decode.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace draftlab {

struct BenchQuestion {
  int64_t id = 0;            // question_id, or the 1-based line number when absent
  std::string category;      // empty when absent
  std::vector<std::string> turns;
};

// The file of a dataset: a path to a .jsonl file as given, else $DRAFTLAB_SHARED/data/bench/<name>/question.jsonl
// (DRAFTLAB_SHARED unset: ../shared).
std::string bench_question_path(const std::string& dataset);

// The dataset's name in results: the bench set name, or the file name without folder and extension.
std::string bench_dataset_name(const std::string& dataset);

// The first `count` questions (count <= 0: all). Throws Error naming the file and the line for a malformed line
// (not JSON, no non-empty list of string turns).
std::vector<BenchQuestion> load_bench_questions(const std::string& dataset, int count);

}  // namespace draftlab
