// Hugging Face tokenizer.json (core/text/tokenizer_bpe_json.cpp through core/text/tokenizer.h).
#include "tests/fuzz/exercise_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  const std::string path = fuzz::input_file(data, size, "tokenizer.json");
  return fuzz::expect_clean_failure([&] { fuzz::exercise_tokenizer(*load_hf_tokenizer_json(path)); });
}
