// draftlab - command-line entry point. `draftlab <command> --help` documents each command.
#include <ATen/Parallel.h>

#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include "core/base/error.h"
#include "core/base/platform.h"
#include "experiments/cli/commands.h"

int main(int argc, char** argv) {
  // Must run before the first BLAS call (it may re-execute the program with OPENBLAS_CORETYPE set).
  draftlab::prepare_process_environment(argc, argv);
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::cout << draftlab::cli::usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  try {
    return draftlab::cli::run_command(argc - 1, argv + 1);
  } catch (const draftlab::Error& e) {
    std::cerr << "draftlab " << command << ": error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    // c10::Error and friends: unexpected, but still a clean exit rather than a crash.
    std::cerr << "draftlab " << command << ": internal error: " << e.what() << "\n";
    return 1;
  }
}
