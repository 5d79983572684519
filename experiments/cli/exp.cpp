// draftlab exp NAME: the experiment drivers (experiments/drivers/drivers.h) that reproduce the EAGLE / EAGLE-2
// tables and figures, each writing one HDF5 results file (docs/results-schema.md) and optionally Spec-Bench JSONL.
#include <boost/program_options.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <ctime>
#include <iostream>

#include "analysis/cost_model.h"
#include "analysis/speculation_profile.h"
#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/base/progress_meter.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/experiment_cli.h"
#include "experiments/drivers/drivers.h"
#include "experiments/results/spec_bench_jsonl.h"

namespace po = boost::program_options;

namespace draftlab::cli {

namespace {

// "a,b" and repeated options alike: every comma-separated item of every occurrence.
std::vector<std::string> split_list(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const auto& v : values) {
    size_t pos = 0;
    while (pos <= v.size()) {
      size_t comma = v.find(',', pos);
      if (comma == std::string::npos) comma = v.size();
      if (comma > pos) out.push_back(v.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  return out;
}

template <typename T>
std::vector<T> parse_numbers(const std::vector<std::string>& values, const std::string& option) {
  std::vector<T> out;
  for (const auto& item : split_list(values)) {
    try {
      size_t used = 0;
      const double v = std::stod(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      if (std::is_integral_v<T> && v != static_cast<double>(static_cast<T>(v))) throw std::invalid_argument(item);
      out.push_back(static_cast<T>(v));
    } catch (const std::exception&) {
      throw Error(option + ": expected a comma-separated list of numbers, got '" + item + "'");
    }
  }
  return out;
}

}  // namespace

namespace {

// The progress of one run (see ProgressSettings): a line per ProgressMeter's policy, in a log every
// `every_seconds`.
class RunProgress {
 public:
  RunProgress(const std::string& what, const ProgressSettings& settings)
      : what_(what), every_seconds_(settings.every_seconds), meter_(0, settings.quiet || in_ci()) {}

  void operator()(const ExperimentProgress& p) {
    meter_.set_total(p.total);
    if (!meter_.due(p.done, meter_.seconds_since_draw() >= every_seconds_)) return;
    const double elapsed = meter_.elapsed_seconds();
    char head[160];
    std::snprintf(head, sizeof head, "%s: %lld/%lld question turns (%.0f%%), %.2f/s, ETA %s", what_.c_str(),
                  static_cast<long long>(p.done), static_cast<long long>(p.total),
                  p.total ? 100.0 * p.done / p.total : 100.0, elapsed > 0 ? p.done / elapsed : 0.0,
                  duration_text(meter_.eta_seconds(p.done)).c_str());
    meter_.draw(std::string(head) + " | " + p.line);
  }

 private:
  static bool in_ci() {
    const char* ci = std::getenv("CI");
    return ci && *ci;
  }
  std::string what_;
  double every_seconds_;
  ProgressMeter meter_;
};

}  // namespace

void add_progress_options(po::options_description& desc, ProgressSettings& progress) {
  desc.add_options()
      ("progress-every", po::value(&progress.every_seconds)->default_value(progress.every_seconds),
       "without a terminal (a log file, Slurm): a progress line every this many seconds (0 = every question turn)")
      ("quiet,q", po::bool_switch(&progress.quiet), "no progress lines (also when $CI is set)");
}

ExperimentRun run_experiment_from_cli(ExperimentConfig& c, const ModelOptions& model, int argc, char** argv,
                                      const ProgressSettings& progress) {
  c.target_path = model.model_path;
  c.dtype = model.dtype;
  c.device = model.device;
  const ExperimentPlan plan = plan_experiment(c);  // every option error before the model loads
  c = plan.config;

  ExperimentRun run;
  const InProcessModel* in_process = InProcessModel::current();
  if (in_process == nullptr) run.owned = load_model_and_tokenizer(model);
  const LoadedModel& loaded = in_process ? in_process->model_for(model) : run.owned;
  run.target = loaded.model.get();
  RunProgress report(c.experiment, progress);
  run.results = run_experiment(*loaded.model, *loaded.tokenizer, plan, std::ref(report));
  if (in_process) in_process->deliver(run.results);
  return run;
}

namespace {
thread_local InProcessModel* current_in_process = nullptr;
}  // namespace

InProcessModel::InProcessModel(const LoadedModel& model, const ModelOptions& loaded_with, ResultsFile& results)
    : model_(model), loaded_with_(loaded_with), results_(&results), previous_(current_in_process) {
  current_in_process = this;
}

InProcessModel::~InProcessModel() { current_in_process = previous_; }

InProcessModel* InProcessModel::current() { return current_in_process; }

const LoadedModel& InProcessModel::model_for(const ModelOptions& asked) const {
  const std::pair<const char*, std::pair<std::string, std::string>> fields[] = {
      {"--model", {loaded_with_.model_path, asked.model_path}},
      {"--tokenizer", {loaded_with_.tokenizer_path, asked.tokenizer_path}},
      {"--dtype", {loaded_with_.dtype, asked.dtype}},
      {"--device", {loaded_with_.device, asked.device}},
      {"--path", {loaded_with_.path, asked.path}},
      {"--weights", {loaded_with_.weights, asked.weights}},
      {"--kv-cache", {loaded_with_.kv_cache, asked.kv_cache}},
      {"--quant-dot", {loaded_with_.quant_dot, asked.quant_dot}}};
  for (const auto& [flag, values] : fields)
    check(values.first == values.second, std::string(flag) + ": expected '" + values.first +
                                             "', as the loaded model was, got '" + values.second + "'");
  compute_options(asked);  // checks --threads and sets it
  return model_;
}

int run_exp(int argc, char** argv) {
  ModelOptions model_opts;
  ExperimentConfig c;
  std::vector<std::string> heads, datasets, temperatures, batch_sizes, total_tokens, depth, top_k, grid;
  std::string out_path, jsonl_dir, shard = "0/1", cost_path;
  int64_t seed = 0;
  std::string names;
  for (const auto& n : experiment_names()) names += (names.empty() ? "" : ", ") + n;

  po::options_description desc(
      ("draftlab exp NAME [options]: run an experiment driver and write its results (HDF5, docs/results-schema.md)\n\n" +
       experiments_help() + "\n"
      "Every question turn: --warmup untimed runs, then --repeats timed runs with the methods interleaved (median).\n"
      "The results file appears only when the run is complete.\n\noptions").c_str());
  ProgressSettings progress;
  add_progress_options(desc, progress);
  add_model_options(desc, model_opts);
  desc.add_options()
      ("help,h", "show this help")
      ("out,o", po::value(&out_path), "results file to write (FILE.h5; required but from Python)")
      ("head", po::value(&heads)->composing(), "head folder (EAGLE head, Medusa heads, Hydra heads), DIR or LABEL=DIR (repeatable: a strategy given no head= gets the "
       "first unlabelled one of its kind)")
      ("draft", po::value(&c.draft_path), "small draft model for the classic chain method (speed)")
      ("parallel-draft", po::value(&c.parallel_draft_path), "parallel draft model for pard (train-lm --parallel; speed)")
      ("cost", po::value(&cost_path),
       "this machine's forward cost model for the run's model and settings (bench/forward_cost --out), recorded in the "
       "results (attribute cost_model): table, bounds and plot then predict and bound from it")
      ("datasets", po::value(&datasets)->composing(),
       "comma-separated bench sets (mt_bench, humaneval, gsm8k, alpaca, sum, qa under $DRAFTLAB_SHARED/data/bench) "
       "or .jsonl files (default: all six for speed, mt_bench otherwise)")
      ("questions", po::value(&c.questions)->default_value(0), "questions per dataset (0 = all)")
      ("max-new-tokens,n", po::value(&c.runner.max_new_tokens)->default_value(128), "tokens per answer at most")
      ("warmup", po::value(&c.runner.warmup)->default_value(1), "untimed runs per question turn and method")
      ("repeats", po::value(&c.runner.repeats)->default_value(3), "timed runs per question turn and method (median)")
      ("temperatures", po::value(&temperatures)->composing(), "comma-separated (default: 0,1 for speed, 0 otherwise)")
      ("batch-sizes", po::value(&batch_sizes)->composing(),
       "comma-separated: questions decoded together, each size a run of every method beside batched vanilla "
       "(default: 1,2,3,4,8 for batch, 1 otherwise)")
      ("seed", po::value(&seed)->default_value(0), "base sampling seed")
      ("chat-template", po::value(&c.runner.chat_template)->default_value("plain"),
       "plain, vicuna, llama2-chat, llama3-instruct")
      ("ignore-eos", po::bool_switch(&c.runner.ignore_eos),
       "generate --max-new-tokens on every question, past end-of-sequence tokens (story models end chat "
       "questions at once)")
      ("oracle", po::bool_switch(&c.runner.oracle),
       "T = 0: each method (not the baseline) decodes every question turn once more, untimed, committing one token "
       "per cycle: every answer position is a cycle start, and the results' oracle table holds what a draft from "
       "each would get accepted (draftlab bounds: the oracle draft length, an oracle-chosen K's speed, the best of "
       "several proposers per step)")
      ("strategy,s", po::value(&c.strategy_specs)->composing(),
       "NAME:key=value,... adds a method; NAME = a preset method's label overrides its options; "
       "label=TEXT names it (a new method, or the preset it overrides) (repeatable)")
      ("head-strategy", po::value(&c.head_strategy),
       "ablate-inputs, train-data, ablate-eagle3, data-scaling: the strategy each head drives (one that needs an EAGLE "
       "head; default: the head family's EAGLE-2 tree strategy, eagle2 or eagle3)")
      ("total-tokens", po::value(&total_tokens)->composing(), "sweep: comma-separated total_tokens values (20,40,60)")
      ("depth", po::value(&depth)->composing(), "sweep: comma-separated depths (4,6)")
      ("top-k", po::value(&top_k)->composing(), "sweep: comma-separated top_k values (4,8)")
      ("grid", po::value(&grid)->composing(),
       "sweep: KEY=V1,V2,... another axis over any eagle2 option (e.g. rank_by=value,confidence; total_tokens=auto,20), "
       "or new values for one of the three above (repeatable)")
      ("shard", po::value(&shard)->default_value(shard), "sweep: run grid points with index % n == i")
      ("jsonl", po::value(&jsonl_dir), "also write Spec-Bench answer files DIR/<dataset>/<method>.jsonl");
  SamplingFilterOptions filters;
  add_sampling_filter_options(desc, filters, "sampling-top-k");  // --top-k is the sweep's tree axis
  po::positional_options_description positional;
  positional.add("experiment", 1);
  po::options_description hidden;
  hidden.add_options()("experiment", po::value(&c.experiment));
  po::options_description all;
  all.add(desc).add(hidden);

  po::variables_map vm;
  if (!parse_command_line(all, argc, argv, "exp", vm, &positional, &desc)) return 0;
  apply_sampling_filters(filters, c.runner.filters);
  check(!c.experiment.empty(), "exp: expected an experiment name (" + names + ") (see draftlab exp --help)");
  check(seed >= 0, "--seed: expected >= 0");
  check(!out_path.empty() || InProcessModel::current() != nullptr,
        "exp: --out FILE.h5: expected a results file to write");
  c.runner.seed = static_cast<uint64_t>(seed);
  for (const auto& h : heads) c.heads.push_back(parse_head_spec(h));
  c.datasets = split_list(datasets);
  c.temperatures = parse_numbers<double>(temperatures, "--temperatures");
  c.batch_sizes = parse_numbers<int64_t>(batch_sizes, "--batch-sizes");
  // Every grid value is checked against eagle2's option table here, before the model loads.
  auto join = [](const std::vector<std::string>& parts) {
    std::string all;
    for (const auto& p : parts) all += (all.empty() ? "" : ",") + p;
    return all;
  };
  if (!total_tokens.empty())
    set_grid_axis(c.grid, parse_grid_axis("--total-tokens", "total_tokens", join(total_tokens)));
  if (!depth.empty()) set_grid_axis(c.grid, parse_grid_axis("--depth", "depth", join(depth)));
  if (!top_k.empty()) set_grid_axis(c.grid, parse_grid_axis("--top-k", "top_k", join(top_k)));
  for (const std::string& g : grid) {
    const size_t eq = g.find('=');
    check(eq != std::string::npos && eq > 0, "--grid: expected KEY=V1,V2,..., got '" + g + "'");
    set_grid_axis(c.grid, parse_grid_axis("--grid", g.substr(0, eq), g.substr(eq + 1)));
  }
  parse_shard(shard, c.shard_index, c.shard_count);
  c.command_line = recorded_command_line(argc, argv, vm);
  // The cost model is checked before the run: a bad file stops it before any model loads.
  const std::string cost_text = cost_path.empty() ? "" : read_text_file(cost_path);
  if (!cost_path.empty()) analysis::parse_cost_model(cost_text, cost_path);
  ResultsFile results = run_experiment_from_cli(c, model_opts, argc, argv, progress).results;
  if (!cost_text.empty()) results.attributes["cost_model"] = cost_text;
  if (!out_path.empty()) {
    // SPEED-Bench's speculation profile beside the results (FILE.h5 -> FILE.speculation_profile.json), computed
    // first so that a run whose tables disagree leaves neither file behind.
    const std::string profile = analysis::speculation_profile_json(results, out_path);
    write_results(out_path, results);
    write_file_atomically(analysis::speculation_profile_path(out_path), profile);
  }
  if (!jsonl_dir.empty()) write_spec_bench_jsonl(results, jsonl_dir, static_cast<double>(std::time(nullptr)));

  std::printf("%s\n%s", out_path.empty() ? "(in process)" : out_path.c_str(), summary_table(results).c_str());
  if (!all_identical(results)) {
    std::printf("\nWARNING: a method's greedy output differs from vanilla's (a lossless method must not)\n");
    return 3;
  }
  return 0;
}

}  // namespace draftlab::cli
