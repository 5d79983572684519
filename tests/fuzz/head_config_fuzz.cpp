// A head folder's config.json (core/io/head_folder.h): what Medusa, Hydra, P-EAGLE and DFlash heads read before
// any tensor. The folder holds a weights file, so open_head_folder reaches the config; then every integer field those
// families read, with their minimums and defaults (a default below the minimum: required), and the check that the
// head fits its target.
#include <fstream>

#include "core/io/head_folder.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

struct IntField {
  const char* key;
  int64_t min, fallback;
};
// strategies/medusa/medusa_heads.cpp, peagle/peagle_head.cpp, dflash/dflash_head.cpp.
constexpr IntField kFields[] = {{"medusa_num_heads", 1, 0}, {"medusa_num_layers", 0, 1}, {"hydra_num_heads", 1, 0},
                                {"hydra_num_layers", 1, 1}, {"draft_vocab_size", 1, 97}, {"block_size", 2, 16},
                                {"num_target_layers", 1, 4}, {"draftlab_num_depths", 1, 4}};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  static const std::string folder = [] {
    const std::string dir = fuzz::scratch_dir() + "/head";
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/model.safetensors") << "weights are not read here";
    return dir;
  }();
  fuzz::input_file(data, size, "head/config.json");
  return fuzz::expect_clean_failure([&] {
    const HeadFolder f = open_head_folder(folder, "heads", {"model.safetensors"}, "pytorch_model.bin");
    for (const IntField& field : kFields) {
      try {
        head_config_int(f, field.key, field.min, field.fallback);
      } catch (const Error&) {  // each field on its own: a bad one must not hide the next
      }
    }
    check_head_sizes(f, 64, 97);
  });
}
