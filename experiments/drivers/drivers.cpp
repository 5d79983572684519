#include "experiments/drivers/drivers.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/base/platform.h"
#include "core/base/sha256.h"
#include "core/training/training_log.h"
#include "core/results/git_revision.h"

namespace draftlab {

namespace {

const std::vector<std::string> kAllSets = {"mt_bench", "humaneval", "gsm8k", "alpaca", "sum", "qa"};

bool needs_head(const std::string& strategy) {
  return strategy == "eagle2" || strategy == "eagle-chain" || strategy == "static-tree";
}

MethodSpec method(const std::string& label, const std::string& strategy,
                  std::vector<std::pair<std::string, std::string>> options = {}) {
  return MethodSpec{label, strategy, std::move(options), ""};
}

// "NAME" or "NAME:k=v,k=v".
MethodSpec parse_strategy_spec(const std::string& spec) {
  MethodSpec m;
  m.label = spec;
  const auto colon = spec.find(':');
  m.strategy = spec.substr(0, colon);
  check(!m.strategy.empty(), "--strategy: expected NAME or NAME:key=value,..., got '" + spec + "'");
  if (colon == std::string::npos) return m;
  const std::string rest = spec.substr(colon + 1);
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t comma = rest.find(',', pos);
    if (comma == std::string::npos) comma = rest.size();
    const std::string item = rest.substr(pos, comma - pos);
    if (!item.empty()) {
      const auto eq = item.find('=');
      check(eq != std::string::npos && eq > 0,
            "--strategy " + spec + ": expected key=value items, got '" + item + "'");
      // `label` names the method in tables instead of the spec itself; it is not a strategy option.
      if (item.substr(0, eq) == "label")
        m.label = item.substr(eq + 1);
      else
        m.options.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    }
    pos = comma + 1;
  }
  return m;
}

const HeadSpec* find_head(const ExperimentConfig& c, const std::string& label) {
  for (const auto& h : c.heads)
    if (h.label == label) return &h;
  return nullptr;
}

// The head every single-head driver uses: the unlabelled one, else the only one.
const HeadSpec* main_head(const ExperimentConfig& c) {
  if (const HeadSpec* h = find_head(c, "")) return h;
  return c.heads.size() == 1 ? &c.heads[0] : nullptr;
}

std::string require_head(const ExperimentConfig& c) {
  const HeadSpec* h = main_head(c);
  if (!h) throw Error("exp " + c.experiment + ": --head DIR is required (the trained EAGLE head of the target)");
  return h->path;
}

std::string cpu_description() {
  std::string s = cpu_model_name();
  std::string flags;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) flags += "avx2";
  if (cpu_has_avx512f()) flags += std::string(flags.empty() ? "" : ", ") + "avx512f";
  return flags.empty() ? s : s + " (" + flags + ")";
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

const std::vector<std::string>& experiment_names() {
  static const std::vector<std::string> names = {"speed",         "alpha",         "calibration",
                                                 "positions",     "ablate-eagle2", "ablate-inputs",
                                                 "tree-vs-chain", "train-data",    "sweep"};
  return names;
}

HeadSpec parse_head_spec(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos) return {"", text};
  check(eq > 0 && eq + 1 < text.size(), "--head: expected DIR or LABEL=DIR, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
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

void apply_driver_defaults(ExperimentConfig& c) {
  const auto& names = experiment_names();
  if (std::find(names.begin(), names.end(), c.experiment) == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw Error("exp: expected an experiment name (" + known + "), got '" + c.experiment + "'");
  }
  if (c.datasets.empty()) c.datasets = c.experiment == "speed" ? kAllSets : std::vector<std::string>{"mt_bench"};
  if (c.temperatures.empty())
    c.temperatures = c.experiment == "speed" ? std::vector<double>{0.0, 1.0} : std::vector<double>{0.0};
}

std::vector<MethodSpec> experiment_methods(const ExperimentConfig& c) {
  const std::string& e = c.experiment;
  std::vector<MethodSpec> m{method("vanilla", "vanilla")};
  if (e == "speed") {
    if (!c.draft_path.empty()) m.push_back(method("chain", "chain", {{"draft", c.draft_path}}));
    m.push_back(method("pld", "pld"));
    if (const HeadSpec* h = main_head(c)) {
      m.push_back(method("static-tree", "static-tree", {{"head", h->path}}));
      m.push_back(method("eagle-chain", "eagle-chain", {{"head", h->path}}));
      m.push_back(method("eagle2", "eagle2", {{"head", h->path}}));
    }
  } else if (e == "alpha") {
    m.push_back(method("eagle-chain", "eagle-chain", {{"depth", "5"}, {"head", require_head(c)}}));
  } else if (e == "calibration") {
    m.push_back(method("eagle2", "eagle2", {{"head", require_head(c)}}));
  } else if (e == "positions") {
    m.push_back(method("static-tree", "static-tree", {{"head", require_head(c)}}));
  } else if (e == "ablate-eagle2") {
    const std::string head = require_head(c);
    m.push_back(method("eagle2", "eagle2", {{"head", head}}));
    m.push_back(method("eagle2 w/o value", "eagle2", {{"rank_by", "confidence"}, {"head", head}}));
    m.push_back(method("eagle2 w/o reranking", "eagle2", {{"rerank", "false"}, {"head", head}}));
    m.push_back(method("eagle2 w/o both", "eagle2", {{"rank_by", "confidence"}, {"rerank", "false"}, {"head", head}}));
  } else if (e == "ablate-inputs") {
    for (const auto& h : c.heads) {
      if (h.label.empty())
        throw Error("exp ablate-inputs: expected every --head as LABEL=DIR (one per input variant), got '" + h.path + "'");
      m.push_back(method(h.label, c.head_strategy, {{"head", h.path}}));
    }
    check(!c.heads.empty(), "exp ablate-inputs: --head LABEL=DIR is required, once per input variant");
  } else if (e == "tree-vs-chain") {
    const std::string head = require_head(c);
    m.push_back(method("static-tree", "static-tree", {{"head", head}}));
    m.push_back(method("eagle-chain", "eagle-chain", {{"head", head}}));
  } else if (e == "train-data") {
    for (const char* label : {"fixed", "generated"}) {
      const HeadSpec* h = find_head(c, label);
      if (!h)
        throw Error(std::string("exp train-data: --head ") + label + "=DIR is required (heads trained on fixed and "
                    "on target-generated data)");
      m.push_back(method(label, c.head_strategy, {{"head", h->path}}));
    }
  } else if (e == "sweep") {
    const std::string head = require_head(c);
    check(!c.grid_total_tokens.empty() && !c.grid_depth.empty() && !c.grid_top_k.empty(),
          "exp sweep: --total-tokens, --depth and --top-k need at least one value each");
    int64_t index = 0;
    for (int64_t tt : c.grid_total_tokens)
      for (int64_t d : c.grid_depth)
        for (int64_t k : c.grid_top_k) {
          if (index % c.shard_count == c.shard_index) {
            MethodSpec s = method("eagle2 tt=" + std::to_string(tt) + " d=" + std::to_string(d) + " k=" + std::to_string(k),
                                  "eagle2", {{"total_tokens", std::to_string(tt)}, {"depth", std::to_string(d)},
                                             {"top_k", std::to_string(k)}, {"head", head}});
            s.grid_json = nlohmann::ordered_json{{"index", index}, {"total_tokens", tt}, {"depth", d}, {"top_k", k}}.dump();
            m.push_back(std::move(s));
          }
          ++index;
        }
  } else {
    ExperimentConfig copy = c;
    apply_driver_defaults(copy);  // throws for the unknown name
  }

  // --strategy: override the options of the preset method with that label, or add a method.
  for (const auto& spec : c.strategy_specs) {
    MethodSpec s = parse_strategy_spec(spec);
    auto it = std::find_if(m.begin(), m.end(), [&](const MethodSpec& x) {
      return x.label == (s.label == spec ? s.strategy : s.label);
    });
    if (it != m.end() && it->label != "vanilla") {
      for (const auto& [k, v] : s.options) it->set_option(k, v);
      continue;
    }
    if (needs_head(s.strategy) && s.option("head").empty())
      if (const HeadSpec* h = main_head(c)) s.set_option("head", h->path);
    m.push_back(std::move(s));
  }
  return m;
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

ResultsFile run_experiment(const LlamaModel& target, const Tokenizer& tokenizer, const ExperimentConfig& config_in,
                           const ProgressCallback& progress) {
  ExperimentConfig c = config_in;
  apply_driver_defaults(c);
  const std::vector<MethodSpec> methods = experiment_methods(c);
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
  for (const auto& h : c.heads) {
    models[h.label.empty() ? "head" : "head:" + h.label] = {{"path", h.path}, {"sha256", model_weights_sha256(h.path)}};
    const std::string log = h.path + "/training_log.h5";
    if (is_file(log)) out.training[h.label.empty() ? "head" : h.label] = read_training_record(log);
  }
  if (!c.draft_path.empty())
    models["draft"] = {{"path", c.draft_path}, {"sha256", model_weights_sha256(c.draft_path)}};
  a["models"] = models.dump();

  nlohmann::ordered_json settings = {
      {"datasets", c.datasets},          {"questions", c.questions},
      {"max_new_tokens", runner.max_new_tokens}, {"warmup", runner.warmup},
      {"repeats", runner.repeats},       {"temperatures", c.temperatures},
      {"top_p", runner.top_p},           {"chat_template", runner.chat_template},
      {"seed", runner.seed},             {"ignore_eos", runner.ignore_eos}};
  nlohmann::ordered_json jm = nlohmann::ordered_json::array();
  for (const auto& m : methods)
    jm.push_back({{"label", m.label}, {"strategy", m.strategy}, {"options", nlohmann::ordered_json::parse(m.options_json())}});
  settings["methods"] = jm;
  if (c.experiment == "sweep")
    settings["grid"] = {{"total_tokens", c.grid_total_tokens}, {"depth", c.grid_depth}, {"top_k", c.grid_top_k}};
  a["settings"] = settings.dump();

  for (const auto& dataset : c.datasets) {
    const auto questions = load_bench_questions(dataset, c.questions);
    for (double t : c.temperatures)
      for (auto& run : run_methods(target, tokenizer, methods, bench_dataset_name(dataset), questions, t, runner, progress))
        out.runs.push_back(std::move(run));
  }
  return out;
}

std::string summary_table(const ResultsFile& results) {
  auto seconds_of = [](const RunRecord& r) {
    double s = 0;
    for (double x : r.questions.wall_seconds) s += x;
    return s;
  };
  auto key = [](const RunRecord& r) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "|%g|", r.temperature);
    return r.dataset + buf + r.shard;
  };
  std::map<std::string, double> vanilla_seconds;
  for (const auto& r : results.runs)
    if (r.strategy == "vanilla") vanilla_seconds[key(r)] = seconds_of(r);
  std::vector<double> speedup(results.runs.size(), 0.0);
  std::map<std::string, size_t> best;  // sweeps: the fastest grid point per dataset and temperature
  for (size_t i = 0; i < results.runs.size(); ++i) {
    const RunRecord& r = results.runs[i];
    auto it = vanilla_seconds.find(key(r));
    const double s = seconds_of(r);
    speedup[i] = it != vanilla_seconds.end() && s > 0 ? it->second / s : 0.0;
    if (!r.grid_json.empty()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "|%g", r.temperature);
      const std::string k = r.dataset + buf;
      if (!best.count(k) || speedup[i] > speedup[best[k]]) best[k] = i;
    }
  }
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-28s %-10s %5s %9s %8s %6s %10s\n", "method", "dataset", "T", "tok/s", "speedup",
                "tau", "identical");
  out += line;
  for (size_t i = 0; i < results.runs.size(); ++i) {
    const RunRecord& r = results.runs[i];
    int same = 0, checked = 0;
    for (int8_t v : r.questions.identical)
      if (v >= 0) {
        ++checked;
        same += v;
      }
    const std::string ident = checked ? std::to_string(same) + "/" + std::to_string(checked) : "-";
    bool is_best = false;
    for (const auto& [k, idx] : best) is_best = is_best || idx == i;
    std::snprintf(line, sizeof line, "%-28s %-10s %5g %9.1f %7.2fx %6.2f %10s%s\n", r.method.c_str(), r.dataset.c_str(),
                  r.temperature, r.tokens_per_second, speedup[i], r.tau, ident.c_str(), is_best ? "  <- best" : "");
    out += line;
  }
  return out;
}

}  // namespace draftlab
