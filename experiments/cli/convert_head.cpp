// draftlab convert-head IN.bin OUT_DIR: a published EAGLE, EAGLE-3, Medusa or Hydra head's pytorch_model.bin
// (torch.save) -> OUT_DIR with model.safetensors (keys unchanged) and the config.json found beside IN, which the
// strategy of its family then loads (`-s eagle2:head=OUT_DIR`, `-s eagle3:head=OUT_DIR`; the loaders check keys and
// shapes against the target).
#include <cstdio>
#include <string>

#include "strategies/head_family.h"
#include "core/model/torch_checkpoint.h"
#include "experiments/cli/commands.h"

namespace draftlab::cli {

int run_convert_head(int argc, char** argv) {
  const std::string usage =
      "usage: draftlab convert-head IN.bin OUT_DIR\n"
      "  converts a torch.save() checkpoint (a published EAGLE / EAGLE-3 / Medusa / Hydra head's pytorch_model.bin)\n"
      "  to OUT_DIR/model.safetensors with the same tensor names, and copies the config.json beside IN.bin to OUT_DIR\n";
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::fputs(usage.c_str(), stdout);
    return 0;
  }
  if (argc != 3) {
    std::fputs(usage.c_str(), stderr);
    return 1;
  }
  const int64_t n = convert_torch_checkpoint(argv[1], argv[2]);
  std::fprintf(stderr, "%ld tensors written to %s/model.safetensors (a %s folder)\n", static_cast<long>(n), argv[2],
               head_family_of(argv[2]).title.c_str());
  return 0;
}

}  // namespace draftlab::cli
