// The experiment table: every `draftlab exp` driver of the experiment catalog (analysis/experiment_catalog.h: what it
// reproduces, its tables and figures) with its defaults and the methods it runs, and how a config becomes its
// methods, every option checked before any model loads (drivers.h).
#include <algorithm>

#include "analysis/experiment_catalog.h"
#include "core/base/error.h"
#include "experiments/drivers/drivers.h"
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

// The model a strategy gets from the config (--head of its head kind, --draft, --parallel-draft); "" when none is given or needed.
std::string model_for(const ExperimentConfig& c, const StrategyDescriptor& strategy) {
  switch (strategy.needs) {
    case StrategyNeeds::Head: {
      const HeadSpec* h = main_head(c, strategy.head_family);
      return h ? h->path : "";
    }
    case StrategyNeeds::DraftModel: return c.draft_path;
    case StrategyNeeds::ParallelDraftModel: return c.parallel_draft_path;
    case StrategyNeeds::Nothing: break;
  }
  return "";
}

// Every registered strategy whose needs the config meets (--head, --draft, --parallel-draft), in registry order.
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

// The 2026 drafters beside the EAGLE family, each method when its model is given (--draft, --parallel-draft, a
// --head of the family): the model-free ones, the draft model and PARD, EAGLE-2 and EAGLE-3 at the CPU-sized
// 4 / 4 / 1, P-EAGLE at k 3 and 5, DFlash at blocks 4, 8 and 16 and with DDTree's tree; k=auto and
// ddtree_nodes=auto beside them.
std::vector<MethodSpec> drafters_2026(const ExperimentConfig& c) {
  std::vector<MethodSpec> m;
  for (const char* name : {"pld", "suffix", "lookahead"}) m.push_back(method(find_strategy(name)));
  if (!c.draft_path.empty()) m.push_back(method(find_strategy("chain"), {{"draft", c.draft_path}}));
  if (!c.parallel_draft_path.empty())
    for (const char* k : {"2", "4", "auto"})
      m.push_back(method(find_strategy("pard"), {{"draft", c.parallel_draft_path}, {"k", k}}, std::string("pard k=") + k));
  const std::vector<std::pair<std::string, std::string>> small{{"total_tokens", "4"}, {"depth", "4"}, {"top_k", "1"}};
  for (const StrategyDescriptor* s : {&eagle2_strategy(), &eagle3_strategy()})
    if (const HeadSpec* h = main_head(c, s->head_family)) {
      auto o = small;
      o.emplace_back("head", h->path);
      m.push_back(method(*s, o, s->name + " (tt=4 d=4 k=1)"));
    }
  const StrategyDescriptor& peagle = find_strategy("peagle");
  if (const HeadSpec* h = main_head(c, peagle.head_family))
    for (const char* k : {"3", "5", "auto"})
      m.push_back(method(peagle, {{"head", h->path}, {"k", k}}, std::string("peagle k=") + k));
  const StrategyDescriptor& dflash = find_strategy("dflash");
  if (const HeadSpec* h = main_head(c, dflash.head_family)) {
    for (const char* b : {"4", "8", "16"})
      m.push_back(method(dflash, {{"head", h->path}, {"block_size", b}}, std::string("dflash B=") + b));
    m.push_back(method(dflash, {{"head", h->path}, {"block_size", "4"}, {"k", "auto"}}, "dflash B=4 k=auto"));
    m.push_back(method(dflash, {{"head", h->path}, {"block_size", "8"}, {"ddtree_nodes", "8"}}, "dflash+ddtree B=8 n=8"));
    m.push_back(method(dflash, {{"head", h->path}, {"block_size", "8"}, {"ddtree_nodes", "auto"}},
                       "dflash+ddtree B=8 n=auto"));
  }
  check(m.size() > 3, "exp drafters: expected at least one drafter's model (--draft, --parallel-draft, --head)");
  return m;
}

}  // namespace

const std::vector<ExperimentDescriptor>& experiment_table() {
  using Methods = std::vector<MethodSpec>;
  static const std::vector<ExperimentDescriptor> table = {
      {"speed", "every strategy whose model is given (--head, --draft); six sets, T 0 and 1",
       kAllSets, {0.0, 1.0}, every_strategy},
      {"drafters", "the 2026 drafters (P-EAGLE, PARD, DFlash, DDTree, SuffixDecoding; fixed k and k=auto) beside the "
       "model-free ones, the draft model and EAGLE-2 / EAGLE-3 at 4 / 4 / 1: each method whose model is given (--draft, --parallel-draft, --head "
       "per family); six sets, T 0 and 1",
       kAllSets, {0.0, 1.0}, drafters_2026},
      {"eagle3", "EAGLE-2 with its head beside EAGLE-3 with its head at the same tree settings "
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
      {"ablate-eagle3", "EAGLE-2 head / TTT with the top-layer feature only / TTT + fusion: "
       "every --head LABEL=DIR (scripts/train_ablation_heads.sh) with its family's strategy (eagle2, eagle3) at "
       "60 / 6 / 10 and 4 / 4 / 1", {"mt_bench", "gsm8k"}, {0.0},
       [](const ExperimentConfig& c) { return one_method_per_head(c, {}, "head variant", true); }},
      {"data-scaling", "heads trained on more and more data (--head LABEL=DIR, repeated: "
       "scripts/train_scaling_heads.sh), each with its family's strategy (eagle2, eagle3): speedup and tau against "
       "the training tokens its log records", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) { return one_method_per_head(c, {}, "trained head"); }},
      {"eagle3-alpha", "n-alpha for n = 0..7: 8-token chains (top_k 1, depth 8, total_tokens 9 "
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
      {"alpha", "EAGLE chain drafts of depth 5: tau and n-alpha", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) { return Methods{method(eagle_chain_strategy(), {{"depth", "5"}, {"head", require_head(c)}})}; }},
      {"moe", "EAGLE (static tree), EAGLE-2 and the EAGLE chain: speedup, tau, n-alpha and the "
       "experts each verification reads (run on a mixture-of-experts target and on a dense one)", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) {
         const std::string head = require_head(c);
         const StrategyDescriptor& e = eagle2_strategy();
         return Methods{method(static_tree_strategy(), {{"head", head}}), method(e, {{"head", head}}),
                        method(e, {{"total_tokens", "4"}, {"depth", "4"}, {"top_k", "1"}, {"head", head}},
                               e.name + " (tt=4 d=4 k=1)"),
                        method(eagle_chain_strategy(), {{"depth", "5"}, {"head", head}})};
       }},
      {"batch", "batched decoding (--batch-sizes, default 1,2,3,4,8): throughput and speedup over "
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
      {"calibration", "EAGLE-2 draft confidence vs acceptance", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) { return Methods{method(eagle2_strategy(), {{"head", require_head(c)}})}; }},
      {"positions", "acceptance of each static-tree position", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) { return Methods{method(static_tree_strategy(), {{"head", require_head(c)}})}; }},
      {"ablate-eagle2", "EAGLE-2 w/o value, w/o reranking, w/o both", {"mt_bench", "gsm8k"}, {0.0},
       [](const ExperimentConfig& c) {
         const std::string head = require_head(c);
         const StrategyDescriptor& e = eagle2_strategy();
         return Methods{method(e, {{"head", head}}),
                        method(e, {{"rank_by", "confidence"}, {"head", head}}, e.name + " w/o value"),
                        method(e, {{"rerank", "false"}, {"head", head}}, e.name + " w/o reranking"),
                        method(e, {{"rank_by", "confidence"}, {"rerank", "false"}, {"head", head}}, e.name + " w/o both")};
       }},
      {"ablate-inputs", "one head per input variant (--head LABEL=DIR, repeated)", {"mt_bench"},
       {0.0}, [](const ExperimentConfig& c) { return one_method_per_head(c, {}, "input variant"); }},
      {"tree-vs-chain", "static tree vs chain with the same head", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) {
         const std::string head = require_head(c);
         return Methods{method(static_tree_strategy(), {{"head", head}}), method(eagle_chain_strategy(), {{"head", head}})};
       }},
      {"train-data", "heads trained on fixed vs target-generated data (--head fixed=DIR "
       "--head generated=DIR)", {"mt_bench"}, {0.0},
       [](const ExperimentConfig& c) {
         return one_method_per_head(c, {"fixed", "generated"}, "heads trained on fixed and on target-generated data");
       }},
      {"sweep", "EAGLE-2 over --total-tokens x --depth x --top-k (and any option: --grid KEY=V1,V2); --shard "
       "i/n splits the grid", {"mt_bench"},
       {0.0}, eagle2_grid},
      {"compare", "the methods given with -s beside the baseline (draftlab compare)", {}, {0.0},
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

std::vector<std::string> experiment_names() { return analysis::driver_names(); }

std::string experiments_help() {
  std::string s;
  for (const std::string& name : experiment_names()) {
    const analysis::ExperimentEntry& entry = analysis::find_catalog_entry(name);
    char buf[64];
    std::snprintf(buf, sizeof buf, "  %-15s", name.c_str());
    s += buf + (entry.paper_item.empty() ? "" : entry.paper_item + ": ") + find_experiment(name).summary + "\n";
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
  // Every method planned now (its descriptor found and its options resolved once): a misspelled key or a value out
  // of range fails here, before the model loads and the warm-up runs, not when the method's turn comes.
  for (MethodSpec& s : m) plan_method(s);
  return m;
}

}  // namespace draftlab
