// draftlab strategies: every registered strategy with its options (from the descriptors, strategies/registry.h).
#include <cstdio>
#include <cstring>

#include "core/base/error.h"
#include "experiments/cli/commands.h"
#include "strategies/registry.h"

namespace draftlab::cli {

int run_strategies(int argc, char** argv) {
  bool markdown = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--markdown") == 0) {
      markdown = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("draftlab strategies [--markdown]: the draft strategies, their needs and options (key = range, "
                  "default).\n--markdown prints README's strategies table.\n");
      return 0;
    } else {
      throw Error(std::string("strategies: unknown argument '") + argv[i] + "' (expected --markdown)");
    }
  }
  std::fputs(markdown ? strategies_markdown().c_str() : strategies_help().c_str(), stdout);
  return 0;
}

}  // namespace draftlab::cli
