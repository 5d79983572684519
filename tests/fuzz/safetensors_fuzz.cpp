// safetensors (core/io/safetensors.h): the header, then every tensor's bytes, which must lie inside the file.
#include "core/io/safetensors.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  const std::string path = fuzz::input_file(data, size, "model.safetensors");
  return fuzz::expect_clean_failure([&] {
    const SafetensorsFile file(path);
    for (const TensorEntry& t : file.tensors()) fuzz::touch(t.data, t.nbytes);
    const SafetensorsCollection collection(path);  // the same file through the loader models use
    for (const std::string& name : collection.names()) collection.get(name);
  });
}
