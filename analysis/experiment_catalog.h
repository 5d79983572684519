// The experiment catalog: the one list of what draftlab reproduces, in the papers' order. Each entry names a results
// file's `experiment` (a `draftlab exp` driver) or a benchmark, what of the papers it reproduces, the heading of its
// tables, the figures `draftlab plot` draws for it, and how scripts/reproduce.sh runs it. Everything that lists
// experiments reads it: the drivers (experiments/drivers, which add the methods), the paper tables (their builders,
// keyed by name), `draftlab schema --python` (experiments/cli/schema.cpp: analysis/results_schema.py's EXPERIMENTS, read by plot.py, the
// notebook export and the test fixtures) and `draftlab schema --experiments` (reproduce.sh's and results_doc.sh's
// lists).
#pragma once

#include <string>
#include <vector>

namespace draftlab::analysis {

struct ExperimentEntry {
  std::string name;                  // results attribute `experiment` and `draftlab exp NAME`; a benchmark's name
  std::string paper_item;            // "EAGLE-2 Table 1"; empty for sweep and compare
  std::string heading;               // what its tables show (after "PAPER ITEM: " in `draftlab table`)
  std::vector<std::string> figures;  // plot.py's figures for it, in order
  // scripts/reproduce.sh's runs of it (one results file each: RUN.h5), none when reproduce.sh does not run it
  // (compare); each with the line that explains it in the reproduce listing.
  struct Run {
    std::string name;
    std::string note;
  };
  std::vector<Run> runs;
  std::string prepare;  // what must run first ("bash scripts/train_scaling_heads.sh"), or empty
  bool driver = true;   // false: a benchmark (bench/), writing Markdown and JSON instead of a results file
};

const std::vector<ExperimentEntry>& experiment_catalog();

// Throws Error listing the known names.
const ExperimentEntry& find_catalog_entry(const std::string& name);

// The drivers of the catalog (entries with driver = true), in order.
std::vector<std::string> driver_names();

// "EAGLE-2 Table 1", or for an entry without a paper item its name capitalised ("Sweep").
std::string paper_item_or_name(const ExperimentEntry& entry);

// One line per reproduce.sh run, tab-separated: run, the file it leaves in the results folder (RUN.h5, or RUN.md for
// a benchmark), experiment, paper item, prepare ("-" when nothing: shell `read` merges empty tab-separated fields),
// note (`draftlab schema --experiments`).
std::string reproduce_list_text();

}  // namespace draftlab::analysis
