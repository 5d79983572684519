// llama2.c checkpoint .bin (core/io/llama2c_checkpoint.h): header, config, and every tensor inside the file.
#include "core/io/llama2c_checkpoint.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  const std::string path = fuzz::input_file(data, size, "model.bin");
  return fuzz::expect_clean_failure([&] {
    const Llama2cCheckpoint checkpoint(path);
    checkpoint.config().validate(path);
    for (const TensorEntry& t : checkpoint.tensors()) fuzz::touch(t.data, t.nbytes);
  });
}
