// draftlab plot: the figures of a results file as PNG and SVG, drawn by analysis/plot.py (matplotlib).
//
// The C++ side only finds the script and the interpreter and passes the arguments on; the figures live in one
// Python file so that scripts/export_notebooks.py can copy the same code into notebooks_export/.
#include <boost/program_options.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/model_loading.h"

namespace po = boost::program_options;

#ifndef DRAFTLAB_ANALYSIS_DIR_DEFAULT  // compiled in by analysis/CMakeLists.txt
#define DRAFTLAB_ANALYSIS_DIR_DEFAULT "analysis"
#endif

namespace draftlab::cli {

namespace {

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Runs argv[0] with the arguments (no shell, so paths need no quoting); returns its exit status.
int run_process(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::cout.flush();
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("plot: cannot start " + args[0]);
  if (pid == 0) {
    ::execv(argv[0], argv.data());
    std::cerr << "draftlab plot: cannot run " << args[0] << "\n";
    ::_exit(127);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) < 0) throw Error("plot: lost " + args[0]);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int run_plot(int argc, char** argv) {
  std::string path, out;
  std::vector<std::string> figures;
  po::options_description desc(
      "draftlab plot RESULTS.h5 --out DIR: the figures of a results file as DIR/NAME.png and DIR/NAME.svg\n"
      "(reliability, positions, speed, sweep, ablation, training; default: the file's experiment's figures and\n"
      "its training curves). Needs /usr/bin/python3 with matplotlib, h5py and numpy (scripts/setup.sh installs\n"
      "them); the script is analysis/plot.py in the source tree, or in $DRAFTLAB_ANALYSIS_DIR.\n\noptions");
  desc.add_options()
      ("help,h", "show this help")
      ("results", po::value(&path)->required(), "results file (draftlab exp ... --out FILE.h5)")
      ("out", po::value(&out)->required(), "output directory (created)")
      ("figure", po::value(&figures)->composing(),
       "figure to draw, repeatable: reliability, positions, speed, sweep, ablation, training, all");
  po::positional_options_description positional;
  positional.add("results", 1);
  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "plot", vm, &positional)) return 0;

  const char* env_dir = std::getenv("DRAFTLAB_ANALYSIS_DIR");
  const std::string dir = env_dir && *env_dir ? std::string(env_dir) : std::string(DRAFTLAB_ANALYSIS_DIR_DEFAULT);
  const std::string script = dir + "/plot.py";
  if (!is_file(script))
    throw Error(script + ": plot script not found (set DRAFTLAB_ANALYSIS_DIR to the source tree's analysis/)");
  const std::string python = "/usr/bin/python3";
  if (!is_file(python))
    throw Error(python + " not found: install python3-matplotlib python3-h5py python3-numpy (scripts/setup.sh)");
  if (run_process({python, "-c", "import matplotlib, h5py, numpy"}) != 0)
    throw Error(python + " lacks matplotlib, h5py or numpy: install python3-matplotlib python3-h5py "
                         "python3-numpy (scripts/setup.sh)");
  if (!is_file(path)) throw Error::at(path, "no such results file");

  std::vector<std::string> args{python, script, path, "--out", out};
  for (const std::string& f : figures) args.insert(args.end(), {"--figure", f});
  const int status = run_process(args);
  if (status != 0) throw Error(path + ": plotting failed (" + script + " exited with " + std::to_string(status) + ")");
  return 0;
}

}  // namespace draftlab::cli
