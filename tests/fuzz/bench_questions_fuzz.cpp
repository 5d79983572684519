// Spec-Bench / MT-bench question JSONL (experiments/drivers/bench_questions.h, torch-free).
#include "experiments/drivers/bench_questions.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  const std::string path = fuzz::input_file(data, size, "question.jsonl");
  return fuzz::expect_clean_failure([&] { load_bench_questions(path, 0); });
}
