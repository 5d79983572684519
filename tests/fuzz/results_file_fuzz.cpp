// HDF5 results file (core/results/results_file.h) and training log (core/results/training_curves.h): the same
// bytes through both readers. HDF5 itself is not instrumented, so this finds crashes in it but not its bad reads.
#include "core/results/results_file.h"
#include "core/results/training_curves.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  const std::string path = fuzz::input_file(data, size, "results.h5");
  fuzz::expect_clean_failure([&] { read_results(path); });
  return fuzz::expect_clean_failure([&] { read_training_log(path); });
}
