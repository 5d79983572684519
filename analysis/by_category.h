// Results per question category: a run whose question file mixes categories (MT-bench's eight, a Spec-Bench
// question file's subtasks) split into one run per category, so every table breaks down by category as it does
// by file. The split runs are ordinary runs (dataset "FILE:CATEGORY"), paired with the baseline's split run of the
// same key, so speedups, τ and their bootstrap intervals come from the usual functions.
#pragma once

#include <string>

#include "core/results/results_file.h"

namespace draftlab::analysis {

enum class CategoryGrouping {
  File,      // as written: one run per question file
  Category,  // every category of a file with more than one: "mt_bench:writing", ...
  Subtask,   // Spec-Bench's subtasks: MT-bench's eight categories folded into one "mt_bench", others by category
};

// "file", "category" or "subtask"; throws Error naming --by otherwise.
CategoryGrouping parse_category_grouping(const std::string& text);

// The key a question of `dataset` with `category` falls under: the file itself when the question has no category
// or the file holds one category only (`single_category`), else "dataset:category" ("mt_bench" for MT-bench's
// categories under Subtask; the file name alone when that equals it).
std::string category_key(const std::string& dataset, const std::string& category, bool single_category,
                         CategoryGrouping grouping);

// Every run split by category_key, in order of first appearance; cycles and nodes follow their questions with
// offsets recomputed, tokens_per_second and tau recomputed. File returns the input unchanged.
ResultsFile split_by_category(const ResultsFile& results, CategoryGrouping grouping);

}  // namespace draftlab::analysis
