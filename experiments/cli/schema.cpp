// draftlab schema [--markdown | --python] [--out FILE]: the results schema (core/results/results_schema.h) as
// the tables of docs/results-schema.md or as the Python module analysis/results_schema.py.
#include <iostream>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/results/schema_text.h"
#include "experiments/cli/commands.h"

namespace draftlab::cli {

int run_schema(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  bool python = false;
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << "usage: draftlab schema [--markdown | --python] [--out FILE]\n\n"
                   "Prints the results schema (core/results/results_schema.h, the one declaration of every column\n"
                   "and attribute of a results file):\n"
                   "  --markdown  the tables of docs/results-schema.md, between its generated-block markers (default)\n"
                   "  --python    the Python module analysis/results_schema.py\n"
                   "  --out FILE  write FILE instead of printing: with --markdown, replace the marked block of FILE\n"
                   "              (the prose around it stays); with --python, the whole file\n\n"
                   "Regenerate the committed copies after editing results_schema.h:\n"
                   "  draftlab schema --markdown --out docs/results-schema.md\n"
                   "  draftlab schema --python --out analysis/results_schema.py\n";
      return 0;
    }
    if (args[i] == "--markdown") {
      python = false;
    } else if (args[i] == "--python") {
      python = true;
    } else if (args[i] == "--out") {
      check(i + 1 < args.size(), "schema: --out expects a file name");
      out = args[++i];
    } else {
      throw Error("schema: unknown argument '" + args[i] + "' (expected --markdown, --python or --out FILE)");
    }
  }
  const std::string text = python ? schema_python() : schema_markdown();
  if (out.empty()) {
    std::cout << text;
  } else {
    write_file_atomically(out, python ? text : replace_generated_block(read_text_file(out), text, out));
    std::cout << out << "\n";
  }
  return 0;
}

}  // namespace draftlab::cli
