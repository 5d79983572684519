// Spec-Bench answer folders read back and reported as Spec-Bench's speed.py does, against numbers computed by hand
// from the files; malformed lines are errors naming the file, the line and the field.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "analysis/spec_bench_answers.h"
#include "test_errors.h"
#include "test_paths.h"

namespace draftlab::analysis {
namespace {

using draftlab::testing::expect_error;

std::string fresh(const std::string& name) {
  const std::string dir = draftlab::testing::temp_dir() + "/" + name;
  EXPECT_EQ(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "/set'").c_str()), 0);
  return dir;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// Two questions: "writing" (2 turns) and "coding" (1 turn).
std::string answers(double t1, double t2, double t3, const std::string& accepts1, const std::string& accepts2) {
  return R"({"question_id": 1, "category": "writing", "choices": [{"index": 0, "turns": ["a", "b"], )"
         R"("new_tokens": [10, 10], "wall_time": [)" + std::to_string(t1) + ", " + std::to_string(t2) +
         R"(], "accept_lengths": )" + accepts1 + "}]}\n" +
         R"({"question_id": 2, "category": "coding", "choices": [{"index": 0, "turns": ["c"], )"
         R"("new_tokens": [30], "wall_time": [)" + std::to_string(t3) + R"(], "accept_lengths": )" + accepts2 +
         "}]}\n";
}

TEST(SpecBenchAnswers, SpeedupAndTauAsSpeedPyComputesThem) {
  const std::string dir = fresh("answers");
  write(dir + "/set/m-vanilla-float16-temp-0.0.jsonl", answers(1.0, 1.0, 3.0, "[1, 1]", "[1]"));
  write(dir + "/set/other-eagle-float16-temp-0.0.jsonl", answers(0.5, 0.5, 1.0, "[3, 4, 5]", "[2, 2]"));
  const auto files = read_answer_folder(dir);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[1].dataset, "set");
  EXPECT_EQ(files[1].questions[0].new_tokens, 20);
  const Report r = spec_bench_report(files, "vanilla", CategoryGrouping::Category, dir);
  ASSERT_EQ(r.tables.size(), 1u);
  const Table& t = r.tables[0];
  EXPECT_EQ(t.columns, (std::vector<std::string>{"File", "set:writing Speedup", "set:writing τ", "set:coding Speedup",
                                                 "set:coding τ", "Overall Speedup", "Overall τ"}));
  // By hand: vanilla speeds 20/2 = 10 and 30/3 = 10 (mean 10); eagle 20/1 = 20 and 30/1 = 30 (mean 25).
  const std::vector<Cell>& eagle = t.rows[1];
  EXPECT_EQ(eagle[0].text, "set/other-eagle-float16-temp-0.0.jsonl");
  EXPECT_EQ(eagle[1].text, "2.00x");  // writing: 20 / 10
  EXPECT_EQ(eagle[2].text, "4.00");   // mean of 3, 4, 5
  EXPECT_EQ(eagle[3].text, "3.00x");  // coding: 30 / 10
  EXPECT_EQ(eagle[5].text, "2.50x");  // overall: 25 / 10
  EXPECT_EQ(eagle[6].text, "3.20");   // mean of 3, 4, 5, 2, 2
  EXPECT_EQ(t.rows[0][5].text, "1.00x");
}

TEST(SpecBenchAnswers, MalformedFilesNameFileLineAndField) {
  const std::string dir = fresh("bad-answers");
  write(dir + "/set/a.jsonl", answers(1, 1, 1, "[1]", "[1]") + R"({"question_id": 3})" + "\n");
  expect_error([&] { read_answer_folder(dir); }, {"a.jsonl", "line 3", "choices"});
  write(dir + "/set/a.jsonl", answers(1, 1, 1, "[[1], [2]]", "[1]"));  // per-turn lists: not Spec-Bench's layout
  expect_error([&] { read_answer_folder(dir); }, {"a.jsonl", "line 1", "accept_lengths", "flat"});
  // A float question id: get<int64_t>() of 1e20 was undefined behaviour (tests/fuzz/regressions/spec_bench_answers).
  write(dir + "/set/a.jsonl",
        R"({"question_id": 1e20, "choices": [{"turns": [], "new_tokens": [1], "wall_time": [1]}]})" "\n");
  expect_error([&] { read_answer_folder(dir); }, {"a.jsonl", "line 1", "question_id", "an integer"});
  write(dir + "/set/a.jsonl", "not json\n");
  expect_error([&] { read_answer_folder(dir); }, {"a.jsonl", "line 1", "not JSON"});
  expect_error([&] { read_answer_folder(dir + "/nothing"); }, {"nothing", "not a folder"});
}

}  // namespace
}  // namespace draftlab::analysis
