#include "experiments/drivers/drivers.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>

#include "core/base/cpu_features.h"
#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/base/platform.h"
#include "core/base/sha256.h"
#include "strategies/head_family.h"
#include "core/training/training_log.h"
#include "core/results/git_revision.h"
#include "analysis/run_metrics.h"
#include "analysis/table_format.h"
#include "strategies/eagle_tree/eagle2.h"
#include "strategies/registry.h"

namespace draftlab {

namespace {

// The heads' keys in the results file's models attribute (their training logs go under /training by the same
// name less "head:"): "head" for a sole unlabelled head, "head:LABEL" for a labelled one, "head:KIND" for each of
// several unlabelled ones (an EAGLE head beside Medusa heads), numbered from the second of a kind.
std::vector<std::string> head_keys(const ExperimentConfig& c) {
  const auto unlabelled = std::count_if(c.heads.begin(), c.heads.end(), [](const HeadSpec& h) { return h.label.empty(); });
  std::vector<std::string> keys;
  for (const auto& h : c.heads) {
    std::string key = !h.label.empty() ? "head:" + h.label
                      : unlabelled == 1 ? "head"
                                        : "head:" + head_family_of(h.path).name;
    const std::string base = key;
    for (int n = 2; std::find(keys.begin(), keys.end(), key) != keys.end(); ++n) key = base + "#" + std::to_string(n);
    keys.push_back(key);
  }
  return keys;
}

std::string cpu_description() {
  std::string s = cpu_model_name();
  std::string flags;
  if (cpu_features().avx2) flags += "avx2";
  if (cpu_has_avx512f()) flags += std::string(flags.empty() ? "" : ", ") + "avx512f";
  return flags.empty() ? s : s + " (" + flags + ")";
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

HeadSpec parse_head_spec(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos) return {"", text};
  check(eq > 0 && eq + 1 < text.size(), "--head: expected DIR or LABEL=DIR, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

GridAxis parse_grid_axis(const std::string& flag, const std::string& option, const std::string& values) {
  GridAxis axis{option, {}};
  std::string item;
  std::stringstream list(values);
  while (std::getline(list, item, ','))
    if (!item.empty()) axis.values.push_back(item);
  check(!axis.values.empty(), flag + ": expected comma-separated values of " + option + ", got '" + values + "'");
  check(option != "head", flag + ": the head is --head, not a grid axis");
  for (const std::string& v : axis.values) {
    StrategyOptions given;
    given.set(option, v);
    try {
      resolve_options(eagle2_strategy(), given);
    } catch (const Error& e) {
      throw Error(flag + ": " + e.what());
    }
  }
  return axis;
}

void set_grid_axis(std::vector<GridAxis>& grid, GridAxis axis) {
  for (GridAxis& a : grid)
    if (a.option == axis.option) {
      a = std::move(axis);
      return;
    }
  grid.push_back(std::move(axis));
}

void parse_shard(const std::string& text, int& index, int& count) {
  const auto slash = text.find('/');
  try {
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    size_t used = 0;
    index = std::stoi(text.substr(0, slash), &used);
    if (used != slash) throw std::invalid_argument("junk");
    count = std::stoi(text.substr(slash + 1), &used);
    if (used != text.size() - slash - 1) throw std::invalid_argument("junk");
  } catch (const std::exception&) {
    throw Error("--shard: expected i/n (e.g. 0/4), got '" + text + "'");
  }
  check(count >= 1 && index >= 0 && index < count,
        "--shard: expected i/n with 0 <= i < n, got '" + text + "'");
}

nlohmann::ordered_json grid_value(const std::string& text) {
  int64_t i = 0;
  if (parse_option_int(text, &i)) return i;
  return text;
}

std::string model_weights_sha256(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return sha256_file(path);
  if (!fs::is_directory(path, ec)) return "none";
  if (fs::is_regular_file(path + "/model.safetensors", ec)) return sha256_file(path + "/model.safetensors");
  std::vector<std::string> weights;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".safetensors" || ext == ".bin" || ext == ".gguf"))
      weights.push_back(entry.path().string());
  }
  return weights.size() == 1 ? sha256_file(weights[0]) : "none";
}

ExperimentPlan plan_experiment(const ExperimentConfig& config) {
  ExperimentPlan plan{config, {}};
  apply_driver_defaults(plan.config);
  plan.methods = experiment_methods(plan.config);
  return plan;
}

ResultsFile run_experiment(const LlamaModel& target, const Tokenizer& tokenizer, const ExperimentPlan& plan,
                           const ExperimentProgressCallback& progress) {
  const ExperimentConfig& c = plan.config;
  const std::vector<MethodSpec>& methods = plan.methods;
  RunnerSettings runner = c.runner;
  runner.shard = std::to_string(c.shard_index) + "/" + std::to_string(c.shard_count);

  ResultsFile out;
  out.threads = at::get_num_threads();
  out.seed = static_cast<int64_t>(runner.seed);
  auto& a = out.attributes;
  a["schema"] = kResultsSchema;
  a["experiment"] = c.experiment;
  a["git_commit"] = git_revision();
  a["command_line"] = c.command_line;
  a["date"] = utc_timestamp();
  a["host"] = host_name();
  a["cpu"] = cpu_description();
  a["blas"] = blas_description();
  a["device"] = c.device;
  a["dtype"] = c.dtype;
  a["forward"] = target.path_description();
  a["shard"] = runner.shard;

  nlohmann::ordered_json models = nlohmann::ordered_json::object();
  models["target"] = {{"path", c.target_path}, {"sha256", model_weights_sha256(c.target_path)}};
  const std::vector<std::string> keys = head_keys(c);
  for (size_t i = 0; i < c.heads.size(); ++i) {
    const HeadSpec& h = c.heads[i];
    models[keys[i]] = {{"path", h.path}, {"sha256", model_weights_sha256(h.path)}};
    const std::string log = h.path + "/training_log.h5";
    if (!is_file(log)) continue;
    TrainingCurves& curves = out.training[keys[i] == "head" ? "head" : keys[i].substr(5)] = read_training_log(log);
    // Logs written before the trainers recorded the family: the folder says it.
    if (!curves.attributes.count("family")) curves.attributes["family"] = head_family_of(h.path).name;
  }
  if (!c.draft_path.empty())
    models["draft"] = {{"path", c.draft_path}, {"sha256", model_weights_sha256(c.draft_path)}};
  if (!c.parallel_draft_path.empty())
    models["parallel_draft"] = {{"path", c.parallel_draft_path}, {"sha256", model_weights_sha256(c.parallel_draft_path)}};
  a["models"] = models.dump();

  nlohmann::ordered_json settings = {
      {"datasets", c.datasets},          {"questions", c.questions},
      {"max_new_tokens", runner.max_new_tokens}, {"warmup", runner.warmup},
      {"repeats", runner.repeats},       {"temperatures", c.temperatures}, {"batch_sizes", c.batch_sizes},
      {"top_k", runner.filters.top_k},   {"top_p", runner.filters.top_p},
      {"sampling_order", sampling_order_name(runner.filters.top_p_first)},
      {"chat_template", runner.chat_template},
      {"seed", runner.seed},             {"ignore_eos", runner.ignore_eos}, {"oracle", runner.oracle}};
  nlohmann::ordered_json jm = nlohmann::ordered_json::array();
  for (const auto& m : methods)
    jm.push_back({{"label", m.label}, {"strategy", m.strategy}, {"options", nlohmann::ordered_json::parse(m.options_json())}});
  settings["methods"] = jm;
  if (std::any_of(methods.begin(), methods.end(), [](const MethodSpec& m) { return !m.grid_json.empty(); }))
    for (const GridAxis& axis : c.grid) {
      nlohmann::ordered_json values = nlohmann::ordered_json::array();
      for (const std::string& v : axis.values) values.push_back(grid_value(v));
      settings["grid"][axis.option] = values;
    }
  a["settings"] = settings.dump();

  // Every question set first (cheap), so that progress knows the whole run's size.
  std::vector<std::pair<std::string, std::vector<BenchQuestion>>> sets;
  if (!c.prompts.empty()) {
    std::vector<BenchQuestion> questions;
    for (size_t i = 0; i < c.prompts.size(); ++i) questions.push_back({static_cast<int64_t>(i + 1), "", {c.prompts[i]}});
    sets.emplace_back("prompts", std::move(questions));
  }
  for (const auto& dataset : c.datasets)
    sets.emplace_back(bench_dataset_name(dataset), load_bench_questions(dataset, c.questions));
  ExperimentProgress state;
  for (const auto& [name, questions] : sets)
    for (const auto& q : questions)
      state.total += static_cast<int64_t>(q.turns.size() * c.temperatures.size() * c.batch_sizes.size());
  const ProgressCallback per_turn = [&](const std::string& line) {
    ++state.done;
    state.line = line;
    if (progress) progress(state);
  };
  for (const auto& [name, questions] : sets)
    for (double t : c.temperatures)
      for (int64_t b : c.batch_sizes) {
        runner.batch_size = b;
        for (auto& run : run_methods(target, tokenizer, methods, name, questions, t, runner, per_turn))
          out.runs.push_back(std::move(run));
      }
  return out;
}

std::vector<SummaryRow> summary_rows(const ResultsFile& results) {
  std::vector<SummaryRow> rows;
  std::map<std::string, size_t> best;  // sweeps: the fastest grid point per dataset and temperature
  for (const RunRecord& r : results.runs) {
    SummaryRow row;
    row.method = r.method;
    row.dataset = r.dataset;
    row.temperature = r.temperature;
    row.batch_size = r.batch_size;
    // The run's metrics as every table computes them (analysis::RunSummary); no interval printed, none drawn.
    const analysis::RunSummary summary = analysis::summarize_run(results, r, analysis::BootstrapOptions{0});
    row.speedup = summary.speedup.value;
    row.tau = summary.tau.value;
    row.checked = summary.checked;
    row.identical = summary.identical;
    row.tokens_per_second = summary.tokens_per_second;
    double draft = 0, verify = 0;
    for (size_t i = 0; i < r.questions.size(); ++i) {
      draft += r.questions.draft_seconds[i];
      verify += r.questions.verify_seconds[i];
    }
    // Nothing generated (every answer ended at once): a time ratio of prefills is no speedup.
    if (row.tokens_per_second == 0) row.speedup = std::numeric_limits<double>::quiet_NaN();
    row.drafted_per_cycle = r.cycles.size() ? static_cast<double>(r.nodes.size()) / r.cycles.size() : 0.0;
    row.draft_share = draft + verify > 0 ? draft / (draft + verify) : 0.0;
    row.verify_share = draft + verify > 0 ? verify / (draft + verify) : 0.0;
    if (!r.grid_json.empty()) {
      const std::string key = r.dataset + "|" + std::to_string(r.temperature);
      if (!best.count(key) || row.speedup > rows[best[key]].speedup) best[key] = rows.size();
    }
    rows.push_back(row);
  }
  for (const auto& [key, index] : best) rows[index].best = true;
  return rows;
}

std::string summary_table(const ResultsFile& results) {
  auto number = [](double x, const char* format) {
    if (!std::isfinite(x)) return std::string("-");
    char buf[32];
    std::snprintf(buf, sizeof buf, format, x);
    return std::string(buf);
  };
  analysis::Table table;
  const auto rows = summary_rows(results);
  // The batch size column only when some run decoded a batch.
  const bool batched = std::any_of(rows.begin(), rows.end(), [](const SummaryRow& r) { return r.batch_size > 1; });
  table.columns = {"method", "dataset", "T", "tok/s", "speedup", "tau", "drafted/c", "draft%", "verify%", "identical"};
  if (batched) table.columns.insert(table.columns.begin() + 3, "B");
  for (const SummaryRow& r : rows) {
    const std::string ident = r.checked ? std::to_string(r.identical) + "/" + std::to_string(r.checked) : "-";
    std::vector<analysis::Cell> row{r.method, r.dataset, number(r.temperature, "%g"),
                                    number(r.tokens_per_second, "%.1f"),
                                    analysis::Cell(number(r.speedup, "%.2fx"), r.best), number(r.tau, "%.2f"),
                                    number(r.drafted_per_cycle, "%.1f"), number(100 * r.draft_share, "%.1f%%"),
                                    number(100 * r.verify_share, "%.1f%%"), ident};
    if (batched) row.insert(row.begin() + 3, analysis::Cell(std::to_string(r.batch_size)));
    table.rows.push_back(row);
  }
  if (std::any_of(rows.begin(), rows.end(), [](const SummaryRow& r) { return r.best; }))
    table.notes.push_back("* the fastest grid point per dataset and temperature");
  return analysis::render_text(table);
}

bool all_identical(const ResultsFile& results) {
  for (const auto& r : results.runs)
    for (int8_t v : r.questions.identical)
      if (v == 0) return false;
  return true;
}

}  // namespace draftlab
