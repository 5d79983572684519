// ResultsFile - the in-memory form of one experiment results file (docs/results-schema.md) and its HDF5
// reader/writer. Torch-free, so analysis tools and tests link it without libtorch.
//
// Drivers fill a ResultsFile as they run and call write_results() once at the end: the file appears atomically
// (temporary file beside it, then rename), so a killed run leaves nothing under the requested name.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/results/results_schema.h"
#include "core/results/training_curves.h"

namespace draftlab {

// A table of a run: one std::vector per column of COLUMNS (results_schema.h), in the schema's order, and
// for_each_column(f) calling f(name, column) on each in that order.
#define DRAFTLAB_COLUMN_MEMBER(name, type, unit, meaning) std::vector<type> name;
#define DRAFTLAB_VISIT_COLUMN(name, type, unit, meaning) f(#name, name);
#define DRAFTLAB_TABLE_MEMBERS(COLUMNS)                                           \
  COLUMNS(DRAFTLAB_COLUMN_MEMBER)                                                 \
  template <class F>                                                              \
  void for_each_column(F&& f) {                                                   \
    COLUMNS(DRAFTLAB_VISIT_COLUMN)                                                \
  }                                                                               \
  template <class F>                                                              \
  void for_each_column(F&& f) const {                                             \
    COLUMNS(DRAFTLAB_VISIT_COLUMN)                                                \
  }                                                                               \
  /* Rows = the length of the first column (the validator checks the others). */ \
  size_t size() const {                                                           \
    size_t n = 0;                                                                 \
    bool first = true;                                                            \
    for_each_column([&](const char*, const auto& column) {                        \
      if (first) n = column.size();                                               \
      first = false;                                                              \
    });                                                                           \
    return n;                                                                     \
  }

// questions/: one row per question turn (identical: 1, 0, or -1 = not checked).
struct QuestionRows {
  DRAFTLAB_TABLE_MEMBERS(DRAFTLAB_QUESTION_COLUMNS)
};

// cycles/: one row per draft/verify cycle, questions concatenated.
struct CycleRows {
  DRAFTLAB_TABLE_MEMBERS(DRAFTLAB_CYCLE_COLUMNS)
};

// nodes/: one row per drafted node, flat tree order within a cycle (confidence, value: NaN = none).
struct NodeRows {
  DRAFTLAB_TABLE_MEMBERS(DRAFTLAB_NODE_COLUMNS)
};

// oracle/: one row per answer position of an --oracle generation (optional: empty for most runs).
struct OracleRows {
  DRAFTLAB_TABLE_MEMBERS(DRAFTLAB_ORACLE_COLUMNS)
};

#undef DRAFTLAB_TABLE_MEMBERS
#undef DRAFTLAB_VISIT_COLUMN
#undef DRAFTLAB_COLUMN_MEMBER

// One /runs/NNNN group: a method on a dataset at a temperature. Its attributes (method, strategy, draft_shape,
// options_json, dataset, temperature, repeats, warmup, tokens_per_second, tau, grid_json, shard) and tables
// (questions, cycles, nodes, oracle) are the members DRAFTLAB_RUN_ATTRIBUTES and DRAFTLAB_RUN_TABLES declare.
// draft_shape has no default: a run must say what it drafts (draft_shapes::none for the baseline).
struct RunRecord {
#define DRAFTLAB_RUN_ATTRIBUTE_MEMBER(field, name, type, default_value, presence, meaning) type field = default_value;
#define DRAFTLAB_RUN_TABLE_MEMBER(member, Rows, COLUMNS, presence, meaning) Rows member;
  DRAFTLAB_RUN_ATTRIBUTES(DRAFTLAB_RUN_ATTRIBUTE_MEMBER)
  DRAFTLAB_RUN_TABLES(DRAFTLAB_RUN_TABLE_MEMBER)
#undef DRAFTLAB_RUN_TABLE_MEMBER
#undef DRAFTLAB_RUN_ATTRIBUTE_MEMBER

  // f(name, presence, value) per attribute, f(name, rows) per table, in the schema's order.
#define DRAFTLAB_VISIT_RUN_ATTRIBUTE(field, name, type, default_value, presence, meaning) \
  f(name, Presence::presence, field);
#define DRAFTLAB_VISIT_RUN_TABLE(member, Rows, COLUMNS, presence, meaning) f(#member, member);
  template <class F>
  void for_each_attribute(F&& f) {
    DRAFTLAB_RUN_ATTRIBUTES(DRAFTLAB_VISIT_RUN_ATTRIBUTE)
  }
  template <class F>
  void for_each_attribute(F&& f) const {
    DRAFTLAB_RUN_ATTRIBUTES(DRAFTLAB_VISIT_RUN_ATTRIBUTE)
  }
  template <class F>
  void for_each_table(F&& f) {
    DRAFTLAB_RUN_TABLES(DRAFTLAB_VISIT_RUN_TABLE)
  }
  template <class F>
  void for_each_table(F&& f) const {
    DRAFTLAB_RUN_TABLES(DRAFTLAB_VISIT_RUN_TABLE)
  }
#undef DRAFTLAB_VISIT_RUN_TABLE
#undef DRAFTLAB_VISIT_RUN_ATTRIBUTE
};

struct ResultsFile {
  // Root attributes (DRAFTLAB_ROOT_ATTRIBUTES): the string ones by name ("schema", "experiment", "git_commit",
  // ...), the integer ones (threads, seed) as members.
  std::map<std::string, std::string> attributes;
#define DRAFTLAB_ROOT_STRING_NONE(name, presence, meaning)
#define DRAFTLAB_ROOT_INT_MEMBER(name, default_value, presence, meaning) int64_t name = default_value;
  DRAFTLAB_ROOT_ATTRIBUTES(DRAFTLAB_ROOT_STRING_NONE, DRAFTLAB_ROOT_INT_MEMBER)
#undef DRAFTLAB_ROOT_INT_MEMBER
#undef DRAFTLAB_ROOT_STRING_NONE
  std::vector<RunRecord> runs;                      // written as /runs/0000, /runs/0001, ... in order
  std::map<std::string, TrainingCurves> training;  // /training/LABEL (copies of training logs)
};

// Checks the attributes (required ones present and non-empty, draft_shape one of the draft shapes, the schema
// version) and the tables of every run (equal column lengths, offsets contiguous and in range, back-references
// matching, identical in {-1, 0, 1}). Throws Error naming `source`, the run and the field.
void validate_results(const ResultsFile& results, const std::string& source);

// Writes `path` atomically. Throws Error naming the path (and the run/dataset) on failure or on inconsistent
// tables (columns of unequal length, offsets out of range).
void write_results(const std::string& path, const ResultsFile& results);

// Reads a file written by write_results(). Throws Error naming the path and the field when it is not a results
// file of this schema version (missing group/dataset/attribute, wrong type, schema mismatch).
ResultsFile read_results(const std::string& path);

// Combines shard files of one experiment: runs concatenated in argument order, training groups united. The root
// attributes are the first file's, with shard = "merged:N"; throws Error naming both files when their
// experiment or schema attributes differ.
ResultsFile merge_results(const std::vector<std::string>& paths);

}  // namespace draftlab
