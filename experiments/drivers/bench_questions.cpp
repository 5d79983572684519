#include "experiments/drivers/bench_questions.h"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/base/error.h"

namespace draftlab {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::string bench_question_path(const std::string& dataset) {
  if (ends_with(dataset, ".jsonl")) return dataset;
  const char* env = std::getenv("DRAFTLAB_SHARED");
  const std::string shared = env && *env ? env : "../shared";
  return shared + "/data/bench/" + dataset + "/question.jsonl";
}

std::string bench_dataset_name(const std::string& dataset) {
  if (!ends_with(dataset, ".jsonl")) return dataset;
  std::string name = dataset.substr(dataset.find_last_of('/') + 1);
  return name.substr(0, name.size() - 6);
}

std::vector<BenchQuestion> load_bench_questions(const std::string& dataset, int count) {
  const std::string path = bench_question_path(dataset);
  std::ifstream in(path);
  if (!in)
    throw Error::at(path, "cannot open (bench sets: mt_bench, humaneval, gsm8k, alpaca, sum, qa under "
                          "$DRAFTLAB_SHARED/data/bench, or a .jsonl file with question_id, category, turns)");
  std::vector<BenchQuestion> out;
  std::string line;
  for (int lineno = 1; (count <= 0 || static_cast<int>(out.size()) < count) && std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string field = "line " + std::to_string(lineno);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error::in_file(path, field, "a JSON object", std::string("invalid JSON (") + e.what() + ")");
    }
    BenchQuestion q;
    q.id = lineno;
    if (!j.is_object() || !j.contains("turns") || !j["turns"].is_array() || j["turns"].empty())
      throw Error::in_file(path, field, "an object with a non-empty list \"turns\"", line.substr(0, 80));
    for (const auto& t : j["turns"]) {
      if (!t.is_string()) throw Error::in_file(path, field + " turns", "strings", t.dump().substr(0, 80));
      q.turns.push_back(t.get<std::string>());
    }
    if (j.contains("question_id")) {
      if (!j["question_id"].is_number_integer())
        throw Error::in_file(path, field + " question_id", "an integer", j["question_id"].dump());
      q.id = j["question_id"].get<int64_t>();
    }
    if (j.contains("category") && j["category"].is_string()) q.category = j["category"].get<std::string>();
    out.push_back(std::move(q));
  }
  if (out.empty()) throw Error::at(path, "no questions");
  return out;
}

}  // namespace draftlab
