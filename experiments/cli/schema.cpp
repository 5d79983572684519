// draftlab schema [--markdown | --python | --experiments] [--out FILE]: the results schema
// (core/results/results_schema.h) as the tables of docs/results-schema.md or as the Python module
// analysis/results_schema.py (with the experiment catalog), or the catalog's reproduce list.
#include <iostream>
#include <string>
#include <vector>

#include "analysis/experiment_catalog.h"
#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/results/schema_text.h"
#include "experiments/cli/commands.h"

namespace draftlab::cli {

namespace {

std::string py_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + python_literal(items[i]);
  return out + "]";
}

// The experiment catalog (analysis/experiment_catalog.h) as the EXPERIMENTS of analysis/results_schema.py.
std::string experiment_catalog_python() {
  std::string out =
      "\n# The experiment catalog (analysis/experiment_catalog.cpp), in the papers' order: name -> what it reproduces,\n"
      "# its tables' heading, plot.py's figures, reproduce.sh's runs, and whether it is a `draftlab exp` driver (else a\n"
      "# benchmark without a results file)\n"
      "Experiment = collections.namedtuple(\"Experiment\", \"paper_item heading figures runs driver\")\n"
      "EXPERIMENTS = {\n";
  for (const analysis::ExperimentEntry& e : analysis::experiment_catalog()) {
    std::vector<std::string> runs;
    for (const analysis::ExperimentEntry::Run& run : e.runs) runs.push_back(run.name);
    out += "    " + python_literal(e.name) + ": Experiment(" + python_literal(e.paper_item) + ", " + python_literal(e.heading) + ", " + py_list(e.figures) +
           ", " + py_list(runs) + ", " + (e.driver ? "True" : "False") + "),\n";
  }
  return out + "}\n";
}

}  // namespace

int run_schema(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  enum class Form { Markdown, Python, Experiments } form = Form::Markdown;
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << "usage: draftlab schema [--markdown | --python | --experiments] [--out FILE]\n\n"
                   "Prints the results schema (core/results/results_schema.h, the one declaration of every column\n"
                   "and attribute of a results file):\n"
                   "  --markdown  the tables of docs/results-schema.md, between its generated-block markers (default)\n"
                   "  --python    the Python module analysis/results_schema.py, with the experiment catalog\n"
                   "              (analysis/experiment_catalog.cpp) as EXPERIMENTS\n"
                   "  --experiments  scripts/reproduce.sh's runs in order, one per line, tab-separated: run, its\n"
                   "              file (RUN.h5, RUN.md), experiment, paper item, what must run first (-: nothing),\n"
                   "              note\n"
                   "  --out FILE  write FILE instead of printing: with --markdown, replace the marked block of FILE\n"
                   "              (the prose around it stays); with --python, the whole file\n\n"
                   "Regenerate the committed copies after editing results_schema.h:\n"
                   "  draftlab schema --markdown --out docs/results-schema.md\n"
                   "  draftlab schema --python --out analysis/results_schema.py\n";
      return 0;
    }
    if (args[i] == "--markdown") {
      form = Form::Markdown;
    } else if (args[i] == "--python") {
      form = Form::Python;
    } else if (args[i] == "--experiments") {
      form = Form::Experiments;
    } else if (args[i] == "--out") {
      check(i + 1 < args.size(), "schema: --out expects a file name");
      out = args[++i];
    } else {
      throw Error("schema: unknown argument '" + args[i] + "' (expected --markdown, --python, --experiments or --out FILE)");
    }
  }
  const std::string text = form == Form::Python        ? schema_python() + experiment_catalog_python()
                           : form == Form::Experiments ? analysis::reproduce_list_text()
                                                       : schema_markdown();
  if (out.empty()) {
    std::cout << text;
  } else {
    write_file_atomically(out, form != Form::Markdown ? text : replace_generated_block(read_text_file(out), text, out));
    std::cout << out << "\n";
  }
  return 0;
}

}  // namespace draftlab::cli
