// Token-line files (core/text/token_lines.h: `draftlab make-head-data --format tokens`, read back by train-head):
// parsed against a vocabulary of 97, every sequence's mask as long as its tokens, and each written back and read
// again to the same sequence.
#include <cstdlib>

#include "core/text/token_lines.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  const std::string path = fuzz::input_file(data, size, "data.tokens");
  return fuzz::expect_clean_failure([&] {
    bool masked = false;
    const auto sequences = read_token_lines(path, 97, &masked);
    for (const MaskedSequence& s : sequences) {
      if (s.tokens.empty() || s.mask.size() != s.tokens.size()) std::abort();
      std::vector<int64_t> prompt, continuation;
      for (size_t i = 0; i < s.tokens.size(); ++i) (s.mask[i] ? continuation : prompt).push_back(s.tokens[i]);
      // A sequence with its mask all 1 has no "|": written back with one, its prompt is empty.
      const std::string line = format_token_line(prompt, continuation) + "\n";
      const std::string again =
          fuzz::input_file(reinterpret_cast<const uint8_t*>(line.data()), line.size(), "again.tokens");
      const auto back = read_token_lines(again, 97);
      if (back.size() != 1 || back[0].tokens != s.tokens) std::abort();
    }
  });
}
