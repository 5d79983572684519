// The papers' tables filled with the numbers of one results file, chosen by its `experiment` attribute:
//   speed         -> EAGLE-2 Table 1 (speedup and τ per dataset x method, one table per temperature)
//   ablate-eagle2 -> EAGLE-2 Table 3 (same layout, the ablated variants as methods)
//   train-data    -> EAGLE Table 6 (same layout, the training data as methods)
//   alpha         -> EAGLE Table 2 (τ and 0-α .. 4-α)
//   ablate-inputs -> EAGLE Figure 8 as a table (speedup, τ, 0-α, 1-α per input variant)
//   tree-vs-chain -> EAGLE Table 5 (τ of chain and tree drafts, the tree's gain)
//   calibration   -> EAGLE-2 Figure 6 as a table (bins, counts, acceptance, ECE; ECE per depth)
//   positions     -> EAGLE-2 Figure 5 as a table (P1..Pn acceptance across questions)
//   sweep         -> the grid with speedup and τ, the best point marked
#pragma once

#include <string>

#include "analysis/bootstrap.h"
#include "analysis/table_format.h"
#include "core/results/results_file.h"

namespace draftlab::analysis {

struct TableOptions {
  bool intervals = false;  // add bootstrap intervals to speedup and τ cells
  BootstrapOptions bootstrap;
};

// Throws Error naming `source` and the field `experiment` when the experiment is not one of the above.
Report paper_tables(const ResultsFile& results, const std::string& source, const TableOptions& options = {});

// "host (cpu), 2 threads, blas, cpu float32; models: target ts-tiny [sha256 1a2b3c4d], ...; commit, date".
std::string machine_caption(const ResultsFile& results);

// Display name of a dataset as the papers print it (mt_bench -> MT-bench, sum -> CNN/DM, ...).
std::string dataset_display_name(const std::string& dataset);

}  // namespace draftlab::analysis
