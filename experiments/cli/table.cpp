// draftlab table: the papers' tables (analysis/paper_tables.h) filled with the numbers of one results file.
#include <boost/program_options.hpp>

#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include "analysis/bounds_report.h"
#include "analysis/by_category.h"
#include "analysis/experiment_catalog.h"
#include "analysis/paper_tables.h"
#include "analysis/spec_bench_answers.h"
#include "analysis/speculation_profile.h"
#include "core/base/error.h"
#include "core/results/results_file.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/model_loading.h"
#include "strategies/registry.h"

namespace po = boost::program_options;

namespace draftlab::cli {

int run_table(int argc, char** argv) {
  std::string path, format = "md", cost_path;
  bool profile = false;
  analysis::TableOptions options;
  // Spec-Bench names its baseline files after the method too (<model>-vanilla-<dtype>-temp-<T>.jsonl).
  std::string experiments, by = "file", baseline = baseline_strategy().name;
  for (const analysis::ExperimentEntry& e : analysis::experiment_catalog())
    if (e.driver) experiments += "\n  " + e.name + " -> " + analysis::paper_item_or_name(e);
  po::options_description desc(
      "draftlab table RESULTS.h5: print the paper table(s) of the file's experiment with its numbers:" + experiments +
      "\ndraftlab table DIR: Spec-Bench answer files (*.jsonl, ours from exp --jsonl or another system's) as "
      "Spec-Bench's speed.py reports them: speedup and mean accepted tokens per subtask and overall\n\noptions");
  desc.add_options()
      ("help,h", "show this help")
      ("results", po::value(&path)->required(), "results file (draftlab exp ... --out FILE.h5) or folder of answer files")
      ("format", po::value(&format)->default_value(format), "md (Markdown), latex (booktabs tabular) or text (aligned, for a terminal)")
      ("by", po::value(&by)->default_value(by),
       "file (one column per question file), category (every category of a file with several: "
       "mt_bench:writing, ...) or subtask (Spec-Bench's: MT-bench's eight categories as one)")
      ("baseline", po::value(&baseline)->default_value(baseline),
       "DIR: the baseline of each folder and temperature is the file whose name contains this")
      ("ci", po::bool_switch(&options.intervals), "add percentile-bootstrap intervals to speedup and τ cells")
      ("resamples", po::value(&options.bootstrap.resamples)->default_value(options.bootstrap.resamples),
       "bootstrap resamples over questions")
      ("level", po::value(&options.bootstrap.level)->default_value(options.bootstrap.level),
       "confidence level of the intervals")
      ("seed", po::value(&options.bootstrap.seed)->default_value(options.bootstrap.seed), "bootstrap seed")
      ("profile", po::bool_switch(&profile),
       "add SPEED-Bench's speculation profile of every drafting run: acceptance lengths, conditional and marginal "
       "acceptance per position, cycles per acceptance length")
      ("cost", po::value(&cost_path),
       "a cost model (bench/forward_cost --out) of the machine and settings of the run: add draftlab bounds' "
       "speed table (decode speedup, predicted, Sequoia's bound, decode / bound, the ceiling) under the paper's "
       "(default: the one the file records, exp --cost)");
  po::positional_options_description positional;
  positional.add("results", 1);
  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "table", vm, &positional)) return 0;
  analysis::check_format(format);
  if (options.bootstrap.resamples < 1) throw Error("--resamples: expected a positive count");
  if (!(options.bootstrap.level > 0 && options.bootstrap.level < 1)) throw Error("--level: expected a value in (0, 1)");

  const analysis::CategoryGrouping grouping = analysis::parse_category_grouping(by);
  const bool folder = std::filesystem::is_directory(path);
  if (folder && (!cost_path.empty() || profile))
    throw Error(std::string(profile ? "--profile" : "--cost") + ": applies to a results file, not to a folder of answer files");
  if (folder) {
    const analysis::Report report = analysis::spec_bench_report(
        analysis::read_answer_folder(path), baseline,
        vm["by"].defaulted() ? analysis::CategoryGrouping::Subtask : grouping, path);
    std::cout << analysis::render(report, format);
    return 0;
  }
  const ResultsFile results = read_results(path);
  std::optional<analysis::CostModel> cost =
      cost_path.empty() ? analysis::recorded_cost_model(results, path) : analysis::read_cost_model(cost_path);
  analysis::Report report = analysis::paper_tables(analysis::split_by_category(results, grouping), path, options);
  if (profile)
    for (analysis::Table& t : analysis::speculation_profile_tables(results)) report.tables.push_back(std::move(t));
  if (cost) {
    analysis::BoundsOptions bounds;
    bounds.cost = &*cost;
    for (analysis::Table& t : analysis::bounds_report(results, path, bounds).tables)
      if (t.title.rfind("Speed", 0) == 0) report.tables.push_back(std::move(t));
    report.caption += " Bounds: cost model " + cost->source + " (" + cost->description + ").";
  }
  std::cout << analysis::render(report, format);
  return 0;
}

}  // namespace draftlab::cli
