// llama2.c tokenizer.bin (core/text/tokenizer_llama2c.cpp): read to the end of the file, then again with the
// vocabulary size a checkpoint's header would give: one token fewer than the file holds and one more.
#include "tests/fuzz/exercise_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  const std::string path = fuzz::input_file(data, size, "tokenizer.bin");
  return fuzz::expect_clean_failure([&] {
    const auto whole = load_llama2c_tokenizer(path);
    fuzz::exercise_tokenizer(*whole);
    for (int32_t n : {whole->vocab_size() - 1, whole->vocab_size() + 1})
      fuzz::expect_clean_failure([&] { fuzz::exercise_tokenizer(*load_llama2c_tokenizer(path, n)); });
  });
}
