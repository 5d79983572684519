// GGUF (core/io/gguf.h): metadata, tensor directory and tensor bytes; then the same file as a vocabulary
// (load_gguf_tokenizer), used and written back as GGUF metadata (core/text/gguf_vocabulary.h).
#include "core/io/gguf.h"
#include "tests/fuzz/exercise_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  const std::string path = fuzz::input_file(data, size, "model.gguf");
  fuzz::expect_clean_failure([&] {
    const GgufTensorFile file(path);
    for (const GgufTensorInfo& info : file.gguf().tensors) {
      fuzz::expect_clean_failure([&] {  // a type draftlab does not read is an Error for that tensor only
        if (const TensorEntry* t = file.find(info.name)) fuzz::touch(t->data, t->nbytes);
      });
    }
  });
  return fuzz::expect_clean_failure([&] { fuzz::exercise_tokenizer(*load_gguf_tokenizer(path)); });
}
