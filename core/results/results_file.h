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

namespace draftlab {

inline constexpr const char* kResultsSchema = "draftlab-results/1";

// questions/ table of a run (one row per question turn).
struct QuestionRows {
  std::vector<int64_t> question_id;
  std::vector<std::string> category;
  std::vector<int32_t> turn;
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> new_tokens;
  std::vector<double> wall_seconds;
  std::vector<int32_t> cycles;
  std::vector<double> draft_seconds;
  std::vector<double> verify_seconds;
  std::vector<int64_t> cycle_offset;
  std::vector<int8_t> identical;  // 1, 0, or -1 = not checked
  std::vector<std::string> answer;
  size_t size() const { return question_id.size(); }
};

// cycles/ table of a run (one row per draft/verify cycle, questions concatenated).
struct CycleRows {
  std::vector<int32_t> question;
  std::vector<int32_t> accept_length;
  std::vector<int32_t> drafted;
  std::vector<double> draft_seconds;
  std::vector<double> verify_seconds;
  std::vector<int64_t> node_offset;
  size_t size() const { return question.size(); }
};

// nodes/ table of a run (one row per drafted node, flat tree order within a cycle).
struct NodeRows {
  std::vector<int64_t> cycle;
  std::vector<int32_t> depth;
  std::vector<int32_t> tree_index;
  std::vector<int32_t> parent;
  std::vector<int32_t> sibling_rank;
  std::vector<float> confidence;  // NaN = none
  std::vector<float> value;       // NaN = none
  std::vector<int8_t> accepted;
  size_t size() const { return cycle.size(); }
};

// One /runs/NNNN group: a method on a dataset at a temperature.
struct RunRecord {
  std::string method;
  std::string strategy;
  std::string options_json = "{}";
  std::string dataset;
  double temperature = 0.0;
  int64_t repeats = 1;
  int64_t warmup = 0;
  double tokens_per_second = 0.0;
  double tau = 0.0;
  std::string grid_json;  // sweeps only; empty = attribute absent
  // The shard (process) that produced the run, "i/n" ("0/1" unless sharded). Kept unchanged by merge_results, so
  // a reader pairs each run with the vanilla run of the same dataset, temperature AND shard (same process).
  std::string shard = "0/1";
  QuestionRows questions;
  CycleRows cycles;
  NodeRows nodes;
};

// One /training/LABEL group (copies of a training log).
struct TrainingRecord {
  std::vector<int64_t> train_step;
  std::vector<double> train_loss;
  std::vector<double> learning_rate;
  std::vector<int64_t> eval_step;
  std::vector<double> eval_loss;
  std::vector<double> eval_accuracy;      // may be empty
  std::vector<double> eval_alpha;         // row-major [passes, 5] (0-alpha .. 4-alpha); may be empty
  std::map<std::string, std::string> attributes;
};

struct ResultsFile {
  // Root attributes. String-valued ones by name ("schema", "experiment", "git_commit", "command_line", "date",
  // "host", "cpu", "blas", "device", "dtype", "models", "shard", "settings"); the two integer ones separately.
  std::map<std::string, std::string> attributes;
  int64_t threads = 1;
  int64_t seed = 0;
  std::vector<RunRecord> runs;                      // written as /runs/0000, /runs/0001, ... in order
  std::map<std::string, TrainingRecord> training;  // /training/LABEL
};

// Checks the tables of every run (equal column lengths, offsets contiguous and in range, back-references
// matching, identical in {-1, 0, 1}) and the schema attribute. Throws Error naming `source`, the run and the field.
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

// Reads a model's training log (core/training/training_log.h layout: train/step, train/loss, train/learning_rate,
// eval/step, eval/loss, optional eval/accuracy and eval/alpha, string attributes) into a TrainingRecord, without
// libtorch. Throws Error naming the path and the missing field.
TrainingRecord read_training_record(const std::string& path);

}  // namespace draftlab
