// SentencePiece tokenizer.model (core/text/tokenizer_spm.cpp: a protobuf read by hand).
#include "tests/fuzz/exercise_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  const std::string path = fuzz::input_file(data, size, "tokenizer.model");
  return fuzz::expect_clean_failure([&] { fuzz::exercise_tokenizer(*load_sentencepiece_model(path)); });
}
