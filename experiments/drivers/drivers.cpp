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
#include "strategies/eagle3/eagle3_strategy.h"
#include "strategies/eagle_tree/eagle2.h"
#include "strategies/eagle_tree/eagle_chain.h"
#include "strategies/eagle_tree/static_tree.h"
#include "strategies/registry.h"

namespace draftlab {

namespace {

const std::vector<std::string> kAllSets = {"mt_bench", "humaneval", "gsm8k", "alpaca", "sum", "qa"};

MethodSpec method(const StrategyDescriptor& strategy, std::vector<std::pair<std::string, std::string>> options = {},
                  const std::string& label = "") {
  return MethodSpec{label.empty() ? strategy.name : label, strategy.name, std::move(options), ""};
}

const HeadSpec* find_head(const ExperimentConfig& c, const std::string& label) {
  for (const auto& h : c.heads)
    if (h.label == label) return &h;
  return nullptr;
}

// The head a strategy that loads heads of `family` gets (drafting drivers, and --strategy without head=): the
// first unlabelled --head of that family, else the only --head when it is of that family. Several unlabelled heads
// of different families (an EAGLE head and Medusa heads) then each go to the strategies that can load them.
const HeadSpec* main_head(const ExperimentConfig& c, const std::string& family) {
  for (const auto& h : c.heads)
    if (h.label.empty() && head_family_of(h.path).name == family) return &h;
  if (c.heads.size() == 1 && head_family_of(c.heads[0].path).name == family) return &c.heads[0];
  return nullptr;
}

// The head of `family` of the drivers that run its strategies (the EAGLE-1/2 head unless named).
std::string require_head(const ExperimentConfig& c, const std::string& family = eagle2_strategy().head_family) {
  const HeadSpec* h = main_head(c, family);
  if (!h)
    throw Error("exp " + c.experiment + ": --head DIR is required (the trained " + find_head_family(family).title +
                " of the target)");
  return h->path;
}

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

namespace {

// The tree strategy of a head's family (HeadFamily::tree_strategy): eagle2 for an EAGLE head, eagle3 for an EAGLE-3
// head. Only families the EAGLE tree grower drafts with (dynamic trees by value) have a tree to sweep here.
const StrategyDescriptor& tree_strategy_of(const ExperimentConfig& c, const HeadSpec& h) {
  const HeadFamily& family = head_family_of(h.path);
  if (!family.load_feature_head)
    throw Error("exp " + c.experiment + ": --head " + h.label + "=" + h.path + ": expected an EAGLE or EAGLE-3 head, " +
                "got " + family.title + " folder");
  return find_strategy(family.tree_strategy);
}

// One method per labelled head (ablate-inputs, train-data, ablate-eagle3, data-scaling): the heads named in
// `labels`, or every head when it is empty (each must be labelled; `needs` says what one head stands for). Each
// drives --head-strategy, else its family's EAGLE-2 tree strategy; with `small` also at the CPU-sized 4 / 4 / 1.
std::vector<MethodSpec> one_method_per_head(const ExperimentConfig& c, const std::vector<std::string>& labels,
                                            const std::string& needs, bool small = false) {
  const StrategyDescriptor* chosen = c.head_strategy.empty() ? nullptr : &find_strategy(c.head_strategy);
  check(!chosen || chosen->needs == StrategyNeeds::Head,
        "--head-strategy: expected a strategy that drafts with an EAGLE head, got '" + c.head_strategy + "'");
  std::vector<HeadSpec> heads;
  if (labels.empty()) {
    check(!c.heads.empty(), "exp " + c.experiment + ": --head LABEL=DIR is required, once per " + needs);
    for (const auto& h : c.heads) {
      if (h.label.empty())
        throw Error("exp " + c.experiment + ": expected every --head as LABEL=DIR (one per " + needs + "), got '" +
                    h.path + "'");
      heads.push_back(h);
    }
  }
  for (const auto& label : labels) {
    const HeadSpec* h = find_head(c, label);
    if (!h) throw Error("exp " + c.experiment + ": --head " + label + "=DIR is required (" + needs + ")");
    heads.push_back(*h);
  }
  std::vector<MethodSpec> m, cpu_sized;
  for (const HeadSpec& h : heads) {
    const StrategyDescriptor& strategy = chosen ? *chosen : tree_strategy_of(c, h);
    m.push_back(method(strategy, {{"head", h.path}}, h.label));
    if (small)
      cpu_sized.push_back(method(strategy, {{"total_tokens", "4"}, {"depth", "4"}, {"top_k", "1"}, {"head", h.path}},
                                 h.label + " (tt=4 d=4 k=1)"));
  }
  m.insert(m.end(), cpu_sized.begin(), cpu_sized.end());
  return m;
}

// A grid value as the results file's `grid` attribute holds it: a number when the option read it as one.
nlohmann::ordered_json grid_value(const std::string& text) {
  int64_t i = 0;
  if (parse_option_int(text, &i)) return i;
  return text;
}

// The short names of the sweep's usual axes in method labels ("eagle2 tt=20 d=4 k=8").
std::string axis_label(const std::string& option) {
  if (option == "total_tokens") return "tt";
  if (option == "depth") return "d";
  if (option == "top_k") return "k";
  return option;
}

std::vector<MethodSpec> eagle2_grid(const ExperimentConfig& c) {
  const std::string head = require_head(c);
  check(!c.grid.empty(), "exp sweep: expected at least one grid axis (--total-tokens, --depth, --top-k, --grid)");
  int64_t points = 1;
  for (const GridAxis& axis : c.grid) {
    check(!axis.values.empty(), "exp sweep: the axis " + axis.option + " needs at least one value");
    points *= static_cast<int64_t>(axis.values.size());
  }
  std::vector<MethodSpec> m;
  for (int64_t index = 0; index < points; ++index) {
    if (index % c.shard_count != c.shard_index) continue;
    std::vector<std::pair<std::string, std::string>> options;
    nlohmann::ordered_json grid{{"index", index}};
    std::string label = "eagle2";
    int64_t rest = index;  // mixed radix, the last axis fastest
    std::vector<size_t> pick(c.grid.size());
    for (size_t a = c.grid.size(); a-- > 0;) {
      pick[a] = static_cast<size_t>(rest % static_cast<int64_t>(c.grid[a].values.size()));
      rest /= static_cast<int64_t>(c.grid[a].values.size());
    }
    for (size_t a = 0; a < c.grid.size(); ++a) {
      const std::string& value = c.grid[a].values[pick[a]];
      options.emplace_back(c.grid[a].option, value);
      grid[c.grid[a].option] = grid_value(value);
      label += " " + axis_label(c.grid[a].option) + "=" + value;
    }
    options.emplace_back("head", head);
    MethodSpec s = method(eagle2_strategy(), options, label);
    s.grid_json = grid.dump();
    m.push_back(std::move(s));
  }
  return m;
}

// The model a strategy gets from the config (--head of its head kind, --draft); "" when none is given or needed.
std::string model_for(const ExperimentConfig& c, const StrategyDescriptor& strategy) {
  switch (strategy.needs) {
    case StrategyNeeds::Head: {
      const HeadSpec* h = main_head(c, strategy.head_family);
      return h ? h->path : "";
    }
    case StrategyNeeds::DraftModel: return c.draft_path;
    case StrategyNeeds::Nothing: break;
  }
  return "";
}

// Every registered strategy whose needs the config meets (--head, --draft), in registry order.
std::vector<MethodSpec> every_strategy(const ExperimentConfig& c) {
  std::vector<MethodSpec> m;
  for (const StrategyDescriptor* s : strategy_table()) {
    if (s->shape == DraftShape::None) continue;  // the baseline comes first anyway
    const std::string model = model_for(c, *s);
    if (s->needs != StrategyNeeds::Nothing && model.empty()) continue;
    std::vector<std::pair<std::string, std::string>> options;
    if (s->needs != StrategyNeeds::Nothing) options.emplace_back(needs_option(s->needs), model);
    m.push_back(method(*s, options));
    if (!s->paper_setting.empty()) {  // the paper's own setting beside the CPU-sized default
      options.insert(options.end(), s->paper_setting.begin(), s->paper_setting.end());
      m.push_back(method(*s, options, s->name + " (" + s->paper_setting_label + ")"));
    }
  }
  return m;
}

}  // namespace

const std::vector<ExperimentDescriptor>& experiment_table() {
  using Methods = std::vector<MethodSpec>;
  static const std::vector<ExperimentDescriptor> table = {
      {"speed", "EAGLE-2 Table 1", "every strategy whose model is given (--head, --draft); six sets, T 0 and 1",
       kAllSets, {0.0, 1.0}, every_strategy},
      {"eagle3", "EAGLE-3 Table 1", "EAGLE-2 with its head beside EAGLE-3 with its head at the same tree settings "
       "(the papers' 60 / 6 / 10 and the CPU-sized 4 / 4 / 1): --head the EAGLE head and --head the EAGLE-3 head; six "
       "sets, T 0 and 1",
       kAllSets, {0.0, 1.0},
       [](const ExperimentConfig& c) {
         const std::string eagle = require_head(c), eagle3 = require_head(c, eagle3_strategy().head_family);
         const StrategyDescriptor& e2 = eagle2_strategy();
         const StrategyDescriptor& e3 = eagle3_strategy();
         const std::vector<std::pair<std::string, std::string>> small{{"total_tokens", "4"}, {"depth", "4"}, {"top_k", "1"}};
         auto with = [](std::vector<std::pair<std::string, std::string>> o, const std::string& head) {
           o.emplace_back("head", head);
           return o;
         };
         return Methods{method(e2, with({}, eagle)), method(e3, with({}, eagle3)),
                        method(e2, with(small, eagle), e2.name + " (tt=4 d=4 k=1)"),
                        method(e3, with(small, eagle3), e3.name + " (tt=4 d=4 k=1)")};
       }},
      {"ablate-eagle3", "EAGLE-3 Table 2", "EAGLE-2 head / TTT with the top-layer feature only / TTT + fusion: "
       "every --head LABEL=DIR (scripts/train_ablation_heads.sh) with its family's strategy (eagle2, eagle3) at "
       "60 / 6 / 10 and 4 / 4 / 1", {"mt_bench", "gsm8k"}, {0.0},
       [](const ExperimentConfig& c) { return one_method_per_head(c, {}, "head variant", true); }},
      {"data-scaling", "EAGLE-3 Figure 1", "heads trained on more and more data (--head LABEL=DIR, repeated: "
       "scripts/train_scaling_heads.sh), each with its family's strategy (eagle2, eagle3): speedup and tau against "
       "the training tokens its log records", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) { return one_method_per_head(c, {}, "trained head"); }},
      {"eagle3-alpha", "EAGLE-3 Figure 7", "n-alpha for n = 0..7: 8-token chains (top_k 1, depth 8, total_tokens 9 "
       "with the root) of eagle2 with the EAGLE head (--head) and eagle3 with the EAGLE-3 head (--head)", {"mt_bench"},
       {0.0},
       [](const ExperimentConfig& c) {
         const std::vector<std::pair<std::string, std::string>> chain{
             {"total_tokens", "9"}, {"depth", "8"}, {"top_k", "1"}};
         auto with = [&](const std::string& head) {
           auto o = chain;
           o.emplace_back("head", head);
           return o;
         };
         return Methods{method(eagle2_strategy(), with(require_head(c)), "eagle2 chain (EAGLE-2 head)"),
                        method(eagle3_strategy(), with(require_head(c, eagle3_strategy().head_family)), "eagle3 chain (EAGLE-3 head)")};
       }},
      {"alpha", "EAGLE Table 2", "EAGLE chain drafts of depth 5: tau and n-alpha", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) { return Methods{method(eagle_chain_strategy(), {{"depth", "5"}, {"head", require_head(c)}})}; }},
      {"moe", "EAGLE Table 3", "EAGLE (static tree), EAGLE-2 and the EAGLE chain: speedup, tau, n-alpha and the "
       "experts each verification reads (run on a mixture-of-experts target and on a dense one)", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) {
         const std::string head = require_head(c);
         const StrategyDescriptor& e = eagle2_strategy();
         return Methods{method(static_tree_strategy(), {{"head", head}}), method(e, {{"head", head}}),
                        method(e, {{"total_tokens", "4"}, {"depth", "4"}, {"top_k", "1"}, {"head", head}},
                               e.name + " (tt=4 d=4 k=1)"),
                        method(eagle_chain_strategy(), {{"depth", "5"}, {"head", head}})};
       }},
      {"batch", "EAGLE Table 7", "batched decoding (--batch-sizes, default 1,2,3,4,8): throughput and speedup over "
       "batched vanilla of EAGLE (static tree), EAGLE-2 (tt=4 d=4 k=1), its total_tokens=auto (a budget from the "
       "batch's forward cost) and the EAGLE chain", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) {
         const std::string head = require_head(c);
         const StrategyDescriptor& e = eagle2_strategy();
         return Methods{method(static_tree_strategy(), {{"head", head}}),
                        method(e, {{"total_tokens", "4"}, {"depth", "4"}, {"top_k", "1"}, {"head", head}},
                               e.name + " (tt=4 d=4 k=1)"),
                        method(e, {{"total_tokens", "auto"}, {"max_auto_tokens", "16"}, {"head", head}},
                               e.name + " (auto)"),
                        method(eagle_chain_strategy(), {{"head", head}})};
       },
       {1, 2, 3, 4, 8}},
      {"calibration", "EAGLE-2 Figure 6", "EAGLE-2 draft confidence vs acceptance", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) { return Methods{method(eagle2_strategy(), {{"head", require_head(c)}})}; }},
      {"positions", "EAGLE-2 Figure 5", "acceptance of each static-tree position", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) { return Methods{method(static_tree_strategy(), {{"head", require_head(c)}})}; }},
      {"ablate-eagle2", "EAGLE-2 Table 3", "EAGLE-2 w/o value, w/o reranking, w/o both", {"mt_bench", "gsm8k"}, {0.0},
       [](const ExperimentConfig& c) {
         const std::string head = require_head(c);
         const StrategyDescriptor& e = eagle2_strategy();
         return Methods{method(e, {{"head", head}}),
                        method(e, {{"rank_by", "confidence"}, {"head", head}}, e.name + " w/o value"),
                        method(e, {{"rerank", "false"}, {"head", head}}, e.name + " w/o reranking"),
                        method(e, {{"rank_by", "confidence"}, {"rerank", "false"}, {"head", head}}, e.name + " w/o both")};
       }},
      {"ablate-inputs", "EAGLE Figure 8", "one head per input variant (--head LABEL=DIR, repeated)", {"mt_bench"},
       {0.0}, [](const ExperimentConfig& c) { return one_method_per_head(c, {}, "input variant"); }},
      {"tree-vs-chain", "EAGLE Table 5", "static tree vs chain with the same head", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) {
         const std::string head = require_head(c);
         return Methods{method(static_tree_strategy(), {{"head", head}}), method(eagle_chain_strategy(), {{"head", head}})};
       }},
      {"train-data", "EAGLE Table 6", "heads trained on fixed vs target-generated data (--head fixed=DIR "
       "--head generated=DIR)", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) {
         return one_method_per_head(c, {"fixed", "generated"}, "heads trained on fixed and on target-generated data");
       }},
      {"sweep", "", "EAGLE-2 over --total-tokens x --depth x --top-k (and any option: --grid KEY=V1,V2); --shard "
       "i/n splits the grid", {"mt_bench"},
       {0.0}, eagle2_grid},
      {"compare", "", "the methods given with -s beside the baseline (draftlab compare)", {}, {0.0},
       [](const ExperimentConfig&) { return Methods{}; }},
  };
  return table;
}

const ExperimentDescriptor& find_experiment(const std::string& name) {
  for (const auto& e : experiment_table())
    if (e.name == name) return e;
  std::string known;
  for (const auto& n : experiment_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("exp: expected an experiment name (" + known + "), got '" + name + "'");
}

std::vector<std::string> experiment_names() {
  std::vector<std::string> names;
  for (const auto& e : experiment_table()) names.push_back(e.name);
  return names;
}

std::string experiments_help() {
  std::string s;
  for (const auto& e : experiment_table()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "  %-15s", e.name.c_str());
    s += buf + (e.paper_item.empty() ? "" : e.paper_item + ": ") + e.summary + "\n";
  }
  return s;
}

void apply_driver_defaults(ExperimentConfig& c) {
  const ExperimentDescriptor& e = find_experiment(c.experiment);
  if (c.datasets.empty() && c.prompts.empty()) c.datasets = e.datasets;
  if (c.temperatures.empty()) c.temperatures = e.temperatures;
  if (c.batch_sizes.empty()) c.batch_sizes = e.batch_sizes;
  for (int64_t b : c.batch_sizes) check(b >= 1, "--batch-sizes: expected values >= 1, got " + std::to_string(b));
}

std::vector<MethodSpec> experiment_methods(const ExperimentConfig& c) {
  std::vector<MethodSpec> m{method(baseline_strategy())};
  for (auto& x : find_experiment(c.experiment).methods(c)) m.push_back(std::move(x));
  const auto presets = static_cast<std::ptrdiff_t>(m.size());

  // --strategy: override the options of the driver's preset method with that label, or add a method (so two
  // specs of one strategy, `-s pld -s pld:num_tokens=2`, are two methods).
  for (const auto& text : c.strategy_specs) {
    MethodSpec s = parse_method_spec(text, "--strategy");
    const StrategyDescriptor& d = find_strategy(s.strategy);  // an unknown name fails here, before any model loads
    const auto preset_end = m.begin() + presets;
    auto it = std::find_if(m.begin() + 1, preset_end, [&](const MethodSpec& x) {
      return x.label == (s.label == text ? s.strategy : s.label);
    });
    if (it != preset_end) {
      for (const auto& [k, v] : s.options) it->set_option(k, v);
      continue;
    }
    // The model it needs, from --head / --draft, unless the spec names one.
    const std::string key = needs_option(d.needs), model = model_for(c, d);
    if (!key.empty() && s.option(key).empty() && !model.empty()) s.set_option(key, model);
    m.push_back(std::move(s));
  }
  // Every method's options against its strategy's table now: a misspelled key or a value out of range fails here,
  // before the model loads and the warm-up runs, not when the method's turn comes.
  for (const MethodSpec& s : m) {
    StrategyOptions given;
    for (const auto& [key, value] : s.options) given.set(key, value);
    resolve_options(find_strategy(s.strategy), given);
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
                           const ExperimentProgressCallback& progress) {
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
  a["models"] = models.dump();

  nlohmann::ordered_json settings = {
      {"datasets", c.datasets},          {"questions", c.questions},
      {"max_new_tokens", runner.max_new_tokens}, {"warmup", runner.warmup},
      {"repeats", runner.repeats},       {"temperatures", c.temperatures}, {"batch_sizes", c.batch_sizes},
      {"top_k", runner.filters.top_k},   {"top_p", runner.filters.top_p},
      {"sampling_order", sampling_order_name(runner.filters.top_p_first)},
      {"chat_template", runner.chat_template},
      {"seed", runner.seed},             {"ignore_eos", runner.ignore_eos}};
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
    row.speedup = analysis::speedup(results, r);
    row.tau = analysis::tau(r);
    double draft = 0, verify = 0;
    for (size_t i = 0; i < r.questions.size(); ++i) {
      draft += r.questions.draft_seconds[i];
      verify += r.questions.verify_seconds[i];
      if (r.questions.identical[i] >= 0) {
        ++row.checked;
        row.identical += r.questions.identical[i];
      }
    }
    row.tokens_per_second = analysis::tokens_per_second(r);
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
