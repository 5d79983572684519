// The papers' tables filled with the numbers of one results file, chosen by its `experiment` attribute: one
// table in paper_tables.cpp (experiment_tables) maps each driver of the experiment catalog (experiment_catalog.h:
// what it reproduces, the heading) to its builder, e.g. speed -> EAGLE-2 Table 1 (speedup and τ per dataset x
// method, one table per temperature), calibration -> EAGLE-2 Figure 6 as a table.
#pragma once

#include <string>
#include <vector>

#include "analysis/bootstrap.h"
#include "analysis/table_format.h"
#include "core/results/results_file.h"

namespace draftlab::analysis {

struct TableOptions {
  bool intervals = false;  // add bootstrap intervals to speedup and τ cells
  BootstrapOptions bootstrap;
};

// Throws Error naming `source` and the field `experiment` when the experiment is not a driver of the catalog.
Report paper_tables(const ResultsFile& results, const std::string& source, const TableOptions& options = {});

// "host (cpu), 2 threads, blas, cpu float32; models: target ts-tiny [sha256 1a2b3c4d], ...; commit, date".
std::string machine_caption(const ResultsFile& results);

// Display name of a dataset as the papers print it (mt_bench -> MT-bench, sum -> CNN/DM, ...).
std::string dataset_display_name(const std::string& dataset);

}  // namespace draftlab::analysis
