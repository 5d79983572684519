// draftlab merge OUT.h5 IN1.h5 IN2.h5 ...: combines the shard files of one experiment (a sweep split with --shard)
// into one results file of the same schema: runs concatenated in argument order, training curves united.
#include <iostream>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/results/results_file.h"
#include "experiments/cli/commands.h"

namespace draftlab::cli {

int run_merge(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << "usage: draftlab merge OUT.h5 IN1.h5 IN2.h5 ...\n\n"
                 "Combines results files of one experiment (shards of a sweep): runs concatenated in argument order,\n"
                 "training curves united, root attributes of the first file with shard = merged:N. The inputs must\n"
                 "share the schema and the experiment. OUT appears only when complete.\n";
    return 0;
  }
  check(args.size() >= 2, "merge: expected OUT.h5 and at least one input file (see draftlab merge --help)");
  const std::vector<std::string> inputs(args.begin() + 1, args.end());
  const ResultsFile merged = merge_results(inputs);
  write_results(args[0], merged);
  std::cout << args[0] << ": " << merged.runs.size() << " runs from " << inputs.size() << " files\n";
  return 0;
}

}  // namespace draftlab::cli
