// draftlab bounds: each run of a results file against the bounds its recorded acceptance and this machine's forward
// cost allow (analysis/bounds_report.h); SPEED-Bench's speculation profile; Sequoia's tree for a run.
#include <boost/program_options.hpp>

#include <iostream>
#include <optional>
#include <string>

#include "analysis/bounds_report.h"
#include "analysis/speculation_profile.h"
#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/results/results_file.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/model_loading.h"

namespace po = boost::program_options;

namespace draftlab::cli {

int run_bounds(int argc, char** argv) {
  std::string path, cost_path, profile_path, tree_path, format = "md";
  int tree_run = -1;
  analysis::BoundsOptions options;
  po::options_description desc(
      "draftlab bounds RESULTS.h5 [--cost COST.json]: per run, measured τ beside τ from the draft's node values, "
      "the chain formula and Sequoia's optimal tree for its per-rank acceptance; with a cost model "
      "(bench/forward_cost --cache 64,256,1024 --out COST.json, same machine, model and settings as the run) the "
      "speedup predicted, Sequoia's speed bound and the perfect-drafter ceiling\n\noptions");
  desc.add_options()
      ("help,h", "show this help")
      ("results", po::value(&path)->required(), "results file (draftlab exp ... --out FILE.h5)")
      ("cost", po::value(&cost_path), "cost model file of bench/forward_cost --out (default: the one the file records, exp --cost)")
      ("format", po::value(&format)->default_value(format), "md, latex or text")
      ("max-nodes", po::value(&options.max_nodes)->default_value(options.max_nodes),
       "largest tree the bounds consider")
      ("max-depth", po::value(&options.max_depth)->default_value(options.max_depth), "deepest tree they consider")
      ("profile", po::value(&profile_path), "write SPEED-Bench's speculation_profile.json of every run here")
      ("tree-out", po::value(&tree_path),
       "write Sequoia's best tree of run --run as a tree file (-s static-tree:tree=FILE runs it)")
      ("run", po::value(&tree_run), "run index (0-based, as in the file) for --tree-out");
  po::positional_options_description positional;
  positional.add("results", 1);
  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "bounds", vm, &positional)) return 0;
  analysis::check_format(format);
  if (options.max_nodes < 1 || options.max_nodes > 1024) throw Error("--max-nodes: expected 1..1024");
  if (options.max_depth < 1 || options.max_depth > 64) throw Error("--max-depth: expected 1..64");
  if (!tree_path.empty() && tree_run < 0) throw Error("--tree-out: needs --run INDEX (the run whose acceptance to use)");

  const ResultsFile results = read_results(path);
  std::optional<analysis::CostModel> cost =
      cost_path.empty() ? analysis::recorded_cost_model(results, path) : analysis::read_cost_model(cost_path);
  if (cost) options.cost = &*cost;
  if (tree_run >= static_cast<int>(results.runs.size()))
    throw Error("--run: expected a run index below " + std::to_string(results.runs.size()) + " (" + path + ")");
  // Everything is computed before anything is written: bad input leaves no file behind.
  const analysis::Report report = analysis::bounds_report(results, path, options);
  const std::string profile = profile_path.empty() ? "" : analysis::speculation_profile_json(results, path);
  std::string tree;
  if (!tree_path.empty()) {
    const RunRecord& run = results.runs[tree_run];
    tree = analysis::sequoia_tree_json(run, analysis::run_bounds(results, run, options), options);
  }
  if (!profile_path.empty()) write_file_atomically(profile_path, profile);
  if (!tree_path.empty()) write_file_atomically(tree_path, tree);
  std::cout << analysis::render(report, format);
  return 0;
}

}  // namespace draftlab::cli
