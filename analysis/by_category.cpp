#include "analysis/by_category.h"

#include <algorithm>
#include <map>
#include <set>

#include "analysis/run_metrics.h"
#include "core/base/error.h"
#include "core/results/results_schema.h"

namespace draftlab::analysis {

namespace {

// MT-bench's categories, as Spec-Bench's evaluation/speed.py folds them into its "mt_bench" subtask.
bool is_mt_bench_category(const std::string& c) {
  static const std::set<std::string> names = {"writing", "roleplay",   "reasoning", "math",
                                              "coding",  "extraction", "stem",      "humanities"};
  return names.count(c) != 0;
}

// A run with no questions, carrying `run`'s attributes under another dataset name.
RunRecord empty_like(const RunRecord& run, const std::string& dataset) {
  RunRecord r = run;
  r.dataset = dataset;
  r.questions = {};
  r.cycles = {};
  r.nodes = {};
  return r;
}

// Appends question row i of `from` (with its cycles and their nodes) to `to`: every column of the schema copied,
// then the back-references (question -> first cycle, cycle -> question and first node, node -> cycle) renumbered.
void append_question(const RunRecord& from, size_t i, RunRecord& to) {
  const QuestionRows& q = from.questions;
  const int32_t row = static_cast<int32_t>(to.questions.size());
#define DRAFTLAB_COPY_QUESTION(name, type, unit, meaning) to.questions.name.push_back(q.name[i]);
  DRAFTLAB_QUESTION_COLUMNS(DRAFTLAB_COPY_QUESTION)
#undef DRAFTLAB_COPY_QUESTION
  to.questions.cycle_offset.back() = static_cast<int64_t>(to.cycles.size());
  for (int64_t j = q.cycle_offset[i]; j < q.cycle_offset[i] + q.cycles[i]; ++j) {
    const int64_t new_cycle = static_cast<int64_t>(to.cycles.size());
#define DRAFTLAB_COPY_CYCLE(name, type, unit, meaning) to.cycles.name.push_back(from.cycles.name[j]);
    DRAFTLAB_CYCLE_COLUMNS(DRAFTLAB_COPY_CYCLE)
#undef DRAFTLAB_COPY_CYCLE
    to.cycles.question.back() = row;
    to.cycles.node_offset.back() = static_cast<int64_t>(to.nodes.size());
    const int64_t first_node = from.cycles.node_offset[j];
    for (int64_t k = first_node; k < first_node + from.cycles.drafted[j]; ++k) {
#define DRAFTLAB_COPY_NODE(name, type, unit, meaning) to.nodes.name.push_back(from.nodes.name[k]);
      DRAFTLAB_NODE_COLUMNS(DRAFTLAB_COPY_NODE)
#undef DRAFTLAB_COPY_NODE
      to.nodes.cycle.back() = new_cycle;
    }
  }
}

}  // namespace

CategoryGrouping parse_category_grouping(const std::string& text) {
  if (text == "file") return CategoryGrouping::File;
  if (text == "category") return CategoryGrouping::Category;
  if (text == "subtask") return CategoryGrouping::Subtask;
  throw Error("--by: expected file, category or subtask, got '" + text + "'");
}

std::string category_key(const std::string& dataset, const std::string& category, bool single_category,
                         CategoryGrouping grouping) {
  if (grouping == CategoryGrouping::File || category.empty() || single_category) return dataset;
  const std::string c = grouping == CategoryGrouping::Subtask && is_mt_bench_category(category) ? "mt_bench" : category;
  return c == dataset ? dataset : dataset + ":" + c;
}

ResultsFile split_by_category(const ResultsFile& results, CategoryGrouping grouping) {
  if (grouping == CategoryGrouping::File) return results;
  ResultsFile out = results;
  out.runs.clear();
  for (const RunRecord& run : results.runs) {
    const std::set<std::string> categories(run.questions.category.begin(), run.questions.category.end());
    std::vector<std::string> order;
    std::map<std::string, RunRecord> parts;
    for (size_t i = 0; i < run.questions.size(); ++i) {
      const std::string key = category_key(run.dataset, run.questions.category[i], categories.size() == 1, grouping);
      if (!parts.count(key)) {
        order.push_back(key);
        parts.emplace(key, empty_like(run, key));
      }
      append_question(run, i, parts.at(key));
    }
    for (const auto& key : order) {
      RunRecord& r = parts.at(key);
      r.tokens_per_second = tokens_per_second(r);
      r.tau = r.cycles.size() ? tau(r) : 0.0;
      out.runs.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace draftlab::analysis
