// config.json (core/io/model_config.h): parsed and validated as a model would be.
#include "core/io/model_config.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  const std::string path = fuzz::input_file(data, size, "config.json");
  return fuzz::expect_clean_failure([&] { load_hf_config(path).validate(path); });
}
