#include "analysis/spec_bench_answers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/base/error.h"

namespace draftlab::analysis {

namespace {

namespace fs = std::filesystem;

double temperature_of(const std::string& name) {
  const auto at = name.rfind("-temp-");
  if (at == std::string::npos) return 0.0;
  try {
    return std::stod(name.substr(at + 6));
  } catch (const std::exception&) {
    return 0.0;
  }
}

AnswerQuestion parse_line(const std::string& line, const std::string& path, int lineno) {
  const std::string where = path + " line " + std::to_string(lineno);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const std::exception& e) {
    throw Error::at(path, "line " + std::to_string(lineno) + ": not JSON (" + e.what() + ")");
  }
  auto need = [&](const nlohmann::json& obj, const char* key, const char* what) -> const nlohmann::json& {
    if (!obj.is_object() || !obj.contains(key))
      throw Error::in_file(path, "line " + std::to_string(lineno) + " field " + key, what, "none");
    return obj.at(key);
  };
  AnswerQuestion q;
  try {
    // An integer only: get<int64_t>() of a float out of int64's range (1e20) is undefined behaviour (UBSan).
    const nlohmann::json& id = need(j, "question_id", "an integer");
    if (!id.is_number_integer())
      throw Error::in_file(path, "line " + std::to_string(lineno) + " field question_id", "an integer", id.dump());
    q.question_id = id.get<int64_t>();
    if (j.contains("category") && j["category"].is_string()) q.category = j["category"].get<std::string>();
    const nlohmann::json& choices = need(j, "choices", "a list with one choice");
    if (!choices.is_array() || choices.empty())
      throw Error::in_file(path, "line " + std::to_string(lineno) + " field choices", "a list with one choice",
                           choices.dump());
    const nlohmann::json& c = choices[0];
    for (const auto& t : need(c, "turns", "a list of strings")) q.turns.push_back(t.get<std::string>());
    for (const auto& n : need(c, "new_tokens", "a list of numbers")) q.new_tokens += n.get<double>();
    for (const auto& w : need(c, "wall_time", "a list of numbers")) q.wall_time += w.get<double>();
    if (c.contains("accept_lengths"))
      for (const auto& a : c["accept_lengths"]) {
        if (!a.is_number())
          throw Error::in_file(path, "line " + std::to_string(lineno) + " field accept_lengths",
                               "one flat list of numbers (Spec-Bench's layout)", a.dump());
        q.accept_lengths.push_back(a.get<double>());
      }
  } catch (const nlohmann::json::exception& e) {
    throw Error::at(path, "line " + std::to_string(lineno) + ": not a Spec-Bench answer (" + e.what() + ")");
  }
  return q;
}

// Spec-Bench's numbers over a set of questions: mean per-question speed and mean accept length (NaN when none).
struct Numbers {
  double speed = std::nan(""), tau = std::nan("");
};

Numbers numbers_of(const std::vector<const AnswerQuestion*>& questions) {
  Numbers n;
  double speeds = 0, accepts = 0;
  size_t timed = 0, count = 0;
  for (const AnswerQuestion* q : questions) {
    if (q->wall_time > 0) {
      speeds += q->new_tokens / q->wall_time;
      ++timed;
    }
    for (double a : q->accept_lengths) accepts += a;
    count += q->accept_lengths.size();
  }
  if (timed) n.speed = speeds / timed;
  if (count) n.tau = accepts / count;
  return n;
}

std::string number(double x, const char* format) {
  if (!std::isfinite(x)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

}  // namespace

std::vector<AnswerFile> read_answer_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error::at(dir, "not a folder of Spec-Bench answer files (*.jsonl)");
  std::vector<std::string> paths;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".jsonl") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) throw Error::at(dir, "no *.jsonl answer files in it");
  std::vector<AnswerFile> files;
  for (const auto& p : paths) {
    AnswerFile f;
    f.path = fs::relative(p, dir).string();
    const fs::path parent = fs::path(f.path).parent_path();
    f.dataset = parent.empty() ? fs::path(dir).filename().string() : parent.string();
    f.method = fs::path(p).stem().string();
    f.temperature = temperature_of(f.method);
    std::ifstream in(p);
    std::string line;
    for (int lineno = 1; std::getline(in, line); ++lineno)
      if (line.find_first_not_of(" \t\r") != std::string::npos) f.questions.push_back(parse_line(line, p, lineno));
    files.push_back(std::move(f));
  }
  return files;
}

Report spec_bench_report(const std::vector<AnswerFile>& files, const std::string& baseline, CategoryGrouping grouping,
                         const std::string& source) {
  Report report;
  report.heading = "Spec-Bench answers: speedup and mean accepted tokens τ per subtask";
  report.caption = "From " + source + " (Spec-Bench's speed.py: speed = mean over questions of new_tokens / "
                   "wall_time; τ = mean of accept_lengths); baseline: the file of each folder and temperature "
                   "whose name contains '" + baseline + "'.";
  // Each question's subtask key, computed once: key_of[file][question].
  std::vector<std::vector<std::string>> key_of(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    std::set<std::string> categories;
    for (const auto& q : files[i].questions) categories.insert(q.category);
    for (const auto& q : files[i].questions)
      key_of[i].push_back(category_key(files[i].dataset, q.category, categories.size() == 1, grouping));
  }
  // The questions of file i under `key` ("": all of them).
  auto select = [&](size_t i, const std::string& key) {
    std::vector<const AnswerQuestion*> out;
    for (size_t j = 0; j < files[i].questions.size(); ++j)
      if (key.empty() || key_of[i][j] == key) out.push_back(&files[i].questions[j]);
    return out;
  };
  std::set<double> temperatures;
  for (const auto& f : files) temperatures.insert(f.temperature);
  for (double t : temperatures) {
    // Subtask keys in order of first appearance over the files at this temperature.
    std::vector<std::string> keys;
    for (size_t i = 0; i < files.size(); ++i)
      if (files[i].temperature == t)
        for (const auto& k : key_of[i])
          if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    Table table;
    char title[64];
    std::snprintf(title, sizeof title, "Temperature = %g", t);
    table.title = title;
    table.columns = {"File"};
    for (const auto& k : keys) {
      table.columns.push_back(k + " Speedup");
      table.columns.push_back(k + " τ");
    }
    table.columns.push_back("Overall Speedup");
    table.columns.push_back("Overall τ");
    for (size_t i = 0; i < files.size(); ++i) {
      const AnswerFile& f = files[i];
      if (f.temperature != t) continue;
      std::optional<size_t> base;
      for (size_t b = 0; b < files.size(); ++b)
        if (files[b].temperature == t && files[b].dataset == f.dataset &&
            files[b].method.find(baseline) != std::string::npos)
          base = b;
      std::vector<Cell> row{Cell(f.path)};
      std::vector<std::string> columns = keys;
      columns.push_back("");  // overall
      for (const auto& k : columns) {
        const auto mine = select(i, k);
        const Numbers n = numbers_of(mine);
        const double base_speed = base ? numbers_of(select(*base, k)).speed : std::nan("");
        row.push_back(Cell(mine.empty() ? "" : number(n.speed / base_speed, "%.2fx")));
        row.push_back(Cell(mine.empty() ? "" : number(n.tau, "%.2f")));
      }
      table.rows.push_back(row);
    }
    report.tables.push_back(table);
  }
  return report;
}

}  // namespace draftlab::analysis
