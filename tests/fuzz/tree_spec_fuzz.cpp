// Draft-tree JSON (strategies/tree_spec.h): parsed from text, then its invariants used as the strategies use them.
#include "strategies/tree_spec.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  return fuzz::expect_clean_failure([&] {
    const TreeSpec spec = parse_tree_spec(std::string(reinterpret_cast<const char*>(data), size), "tree.json");
    spec.max_depth();
    for (int32_t i = 0; i < spec.size(); ++i) {
      const int32_t p = spec.parent[i];
      if (p < -1 || p >= i) std::abort();  // parents come first: the documented order DraftTree relies on
      path_string(spec.paths[i]);
    }
  });
}
