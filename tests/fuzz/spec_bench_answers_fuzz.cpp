// Spec-Bench answer JSONL (analysis/spec_bench_answers.h, torch-free): the input is one model_answer file of a folder
// that also holds a small valid baseline file, read with read_answer_folder and tabled as `draftlab table DIR` does
// (spec_bench_report under every grouping, rendered as Markdown, LaTeX and text).
#include <filesystem>

#include "analysis/spec_bench_answers.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  using namespace draftlab::analysis;
  static const std::string dir = [] {
    const std::string d = fuzz::scratch_dir() + "/answers";
    std::filesystem::create_directories(d + "/mt_bench");
    const std::string baseline =
        "{\"question_id\":81,\"category\":\"writing\",\"choices\":[{\"index\":0,\"turns\":[\"a\",\"b\"],"
        "\"new_tokens\":[4,6],\"wall_time\":[0.5,0.25],\"accept_lengths\":[1,1]}]}\n"
        "{\"question_id\":111,\"category\":\"math\",\"choices\":[{\"index\":0,\"turns\":[\"c\"],"
        "\"new_tokens\":[3],\"wall_time\":[0.125],\"accept_lengths\":[1]}]}\n";
    fuzz::input_file(reinterpret_cast<const uint8_t*>(baseline.data()), baseline.size(),
                     "answers/mt_bench/ts-tiny-vanilla-float32-temp-0.0.jsonl");
    return d;
  }();
  fuzz::input_file(data, size, "answers/mt_bench/ts-tiny-eagle2-float32-temp-0.0.jsonl");
  return fuzz::expect_clean_failure([&] {
    const std::vector<AnswerFile> files = read_answer_folder(dir);
    for (CategoryGrouping g : {CategoryGrouping::File, CategoryGrouping::Category, CategoryGrouping::Subtask}) {
      const Report report = spec_bench_report(files, "vanilla", g, dir);
      render_markdown(report);
      render_latex(report);
      render_text(report);
    }
  });
}
