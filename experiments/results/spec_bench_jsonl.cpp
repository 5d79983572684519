#include "experiments/results/spec_bench_jsonl.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/base/error.h"
#include "core/base/file_bytes.h"

namespace draftlab {

std::vector<std::string> spec_bench_lines(const RunRecord& run, double timestamp) {
  const QuestionRows& q = run.questions;
  std::vector<int64_t> order;
  std::map<int64_t, nlohmann::json> by_id;
  for (size_t i = 0; i < q.size(); ++i) {
    const int64_t id = q.question_id[i];
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      order.push_back(id);
      nlohmann::json choice = {{"index", 0},
                               {"turns", nlohmann::json::array()},
                               {"decoding_steps", nlohmann::json::array()},
                               {"new_tokens", nlohmann::json::array()},
                               {"wall_time", nlohmann::json::array()},
                               {"accept_lengths", nlohmann::json::array()}};
      it = by_id.emplace(id, nlohmann::json{{"question_id", id},
                                            {"answer_id", run.method + "-" + std::to_string(id)},
                                            {"category", q.category[i]},
                                            {"model_id", run.method},
                                            {"choices", nlohmann::json::array({choice})},
                                            {"tstamp", timestamp}})
               .first;
    }
    nlohmann::json& c = it->second["choices"][0];
    c["turns"].push_back(q.answer[i]);
    c["decoding_steps"].push_back(q.cycles[i]);
    c["new_tokens"].push_back(q.new_tokens[i]);
    c["wall_time"].push_back(q.wall_seconds[i]);
    // One flat list over the question's turns, as Spec-Bench's loop extends it turn by turn (its speed.py
    // extends a list with it and takes np.mean: a list per turn breaks it).
    for (int64_t j = q.cycle_offset[i]; j < q.cycle_offset[i] + q.cycles[i]; ++j)
      c["accept_lengths"].push_back(run.cycles.accept_length[j]);
  }
  std::vector<std::string> lines;
  for (int64_t id : order) lines.push_back(by_id[id].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return lines;
}

std::string spec_bench_file_name(const ResultsFile& results, const RunRecord& run) {
  auto clean = [](const std::string& s) {
    std::string out;
    for (char ch : s) {
      const bool keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                        ch == '-' || ch == '_';
      out += keep ? ch : '_';
    }
    return out.empty() ? std::string("_") : out;
  };
  auto attribute = [&](const char* key, const std::string& fallback) {
    auto it = results.attributes.find(key);
    return it == results.attributes.end() || it->second.empty() ? fallback : it->second;
  };
  std::string model = "model";
  try {
    const auto models = nlohmann::json::parse(attribute("models", "{}"));
    if (models.contains("target") && models["target"].contains("path")) {
      std::string path = models["target"]["path"].get<std::string>();
      while (path.size() > 1 && path.back() == '/') path.pop_back();
      model = std::filesystem::path(path).stem().string();
    }
  } catch (const std::exception&) {
  }
  char temp[32];
  std::snprintf(temp, sizeof temp, "%.1f", run.temperature);
  if (std::stod(temp) != run.temperature) std::snprintf(temp, sizeof temp, "%g", run.temperature);
  return clean(run.dataset) + "/" + clean(model) + "-" + clean(run.method) + "-" + clean(attribute("dtype", "float32")) +
         "-temp-" + temp + ".jsonl";
}

void write_spec_bench_jsonl(const ResultsFile& results, const std::string& dir, double timestamp) {
  std::set<std::string> seen;
  for (const auto& run : results.runs) {
    const std::string rel = spec_bench_file_name(results, run);
    const std::string path = dir + "/" + rel;
    if (!seen.insert(rel).second)
      throw Error::at(path, "two runs (same dataset, temperature and method label) would share this Spec-Bench file");
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    if (ec) throw Error::at(path, "cannot create its folder: " + ec.message());
    std::string text;
    for (const auto& line : spec_bench_lines(run, timestamp)) text += line + "\n";
    write_file_atomically(path, text);
  }
}

}  // namespace draftlab
