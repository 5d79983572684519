// draftlab compare: draft strategies beside the baseline on the same prompts, in one run. A thin front end over
// the experiment runner (experiments/drivers): the experiment "compare" with the methods given by -s, the same
// warm-up, interleaved repeats, medians, prompt cut and lossless check as every `draftlab exp` driver, the same
// summary table, and optionally the same HDF5 results file (-o).
#include <ATen/Parallel.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "analysis/bounds_report.h"
#include "analysis/run_metrics.h"
#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/base/platform.h"
#include "core/decoding/verify_cost.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/experiment_cli.h"

namespace po = boost::program_options;

namespace draftlab::cli {

namespace {

// The bounds of a method's run under the cost model (--bounds): its decode speedup, the speedup the model predicts
// for its trees, Sequoia's bound for its acceptance and the perfect-drafter ceiling (analysis/bounds_report.h).
nlohmann::json bounds_json(const ResultsFile& results, const SummaryRow& row, const analysis::BoundsOptions& options) {
  for (const RunRecord& run : results.runs) {
    if (run.method != row.method || run.dataset != row.dataset || run.temperature != row.temperature) continue;
    if (analysis::is_baseline(run)) return nullptr;
    const analysis::RunBounds b = analysis::run_bounds(results, run, options);
    return {{"decode_speedup", b.decode_speedup}, {"predicted_speedup", b.predicted_speedup},
            {"sequoia_bound_speedup", b.sequoia_speedup}, {"sequoia_bound_nodes", b.best_nodes},
            {"ceiling_speedup", b.ceiling_speedup}, {"ceiling_nodes", b.ceiling_nodes}};
  }
  return nullptr;
}

// The summary rows and the environment as JSON (bench/vs_llama_cpp.py reads it); with `bounds` (--bounds), each
// method's bounds beside.
nlohmann::json summary_json(const ResultsFile& results, const analysis::BoundsOptions* bounds) {
  nlohmann::json rows = nlohmann::json::array();
  for (const SummaryRow& r : summary_rows(results)) {
    rows.push_back({{"method", r.method},
                    {"dataset", r.dataset},
                    {"temperature", r.temperature},
                    {"tokens_per_second", r.tokens_per_second},
                    {"speedup", r.speedup},
                    {"tau", r.tau},
                    {"drafted_per_cycle", r.drafted_per_cycle},
                    {"draft_share", r.draft_share},
                    {"verify_share", r.verify_share},
                    {"identical_to_baseline", r.checked ? nlohmann::json(r.identical) : nlohmann::json(nullptr)},
                    {"compared", r.checked}});
    if (bounds) rows.back()["bounds"] = bounds_json(results, r, *bounds);
  }
  nlohmann::json j = {{"command", "compare"}, {"threads", results.threads}, {"methods", rows}};
  for (const char* key : {"command_line", "date", "cpu", "blas", "forward", "dtype", "models", "settings"})
    if (results.attributes.count(key)) j[key] = results.attributes.at(key);
  return j;
}

}  // namespace

int run_compare(int argc, char** argv) {
  ModelOptions model_opts;
  ExperimentConfig c;
  c.experiment = "compare";
  std::vector<std::string> benches;
  std::string json_path, out_path;
  int64_t seed = 0;
  double temperature = 0.0;
  bool with_bounds = false;

  po::options_description desc(
      "draftlab compare: strategies beside the baseline (vanilla) on the same prompts: speed, speedup, tau,\n"
      "identical output. Every prompt: --warmup untimed runs per method, then --repeats timed runs with the methods\n"
      "interleaved; a prompt's time is the median; speedup = the baseline's total time / the method's.\n\n"
      "options");
  ProgressSettings progress;
  add_progress_options(desc, progress);
  add_model_options(desc, model_opts);
  desc.add_options()
      ("help,h", "show this help")
      ("strategy,s", po::value(&c.strategy_specs)->composing(),
       "a method to compare, NAME or NAME:key=value,... (label=TEXT names it) (repeatable; `draftlab strategies` "
       "lists them); the baseline always runs first")
      ("head", po::value<std::vector<std::string>>()->composing()->notifier([&](const std::vector<std::string>& heads) {
         for (const auto& h : heads) c.heads.push_back({"", h});
       }),
       "head folder (EAGLE head, Medusa heads, Hydra heads) for the strategies that load that kind and were given no head= "
       "(repeatable: each strategy gets the first of its kind)")
      ("draft", po::value(&c.draft_path), "draft model for strategies that need one and were given no draft=")
      ("parallel-draft", po::value(&c.parallel_draft_path),
       "parallel draft model (train-lm --parallel) for pard when it was given no draft=")
      ("prompt,p", po::value(&c.prompts)->composing(), "a prompt (repeatable)")
      ("bench", po::value(&benches)->composing(),
       "a bench set from $DRAFTLAB_SHARED/data/bench (mt_bench, humaneval, gsm8k, alpaca, sum, qa) or a .jsonl "
       "file: its first --num-prompts questions, every turn (repeatable)")
      ("num-prompts", po::value(&c.questions)->default_value(5), "questions per --bench set (0 = all)")
      ("max-prompt-tokens", po::value(&c.runner.max_prompt_tokens)->default_value(0),
       "cut longer prompts from the left to this many tokens (0 = the context less --max-new-tokens)")
      ("chat-template", po::value(&c.runner.chat_template)->default_value("plain"),
       "plain, vicuna, llama2-chat, llama3-instruct")
      ("max-new-tokens,n", po::value(&c.runner.max_new_tokens)->default_value(64), "tokens per prompt at most")
      ("ignore-eos", po::bool_switch(&c.runner.ignore_eos),
       "generate --max-new-tokens on every prompt, past end-of-sequence tokens (story models end chat questions "
       "at once)")
      ("oracle", po::bool_switch(&c.runner.oracle),
       "T = 0: each method (not the baseline) decodes every question turn once more, untimed, committing one token "
       "per cycle: every answer position is a cycle start, and the results' oracle table holds what a draft from "
       "each would get accepted (draftlab bounds: the oracle draft length, an oracle-chosen K's speed, the best of "
       "several proposers per step)")
      ("temperature,t", po::value(&temperature)->default_value(0.0), "0 = greedy")
      ("seed", po::value(&seed)->default_value(0), "random seed")
      ("repeats", po::value(&c.runner.repeats)->default_value(3), "timed runs per prompt and method (median)")
      ("warmup", po::value(&c.runner.warmup)->default_value(1), "untimed runs per prompt and method first")
      ("out,o", po::value(&out_path), "also write an HDF5 results file (docs/results-schema.md; draftlab table/plot)")
      ("json", po::value(&json_path), "also write the summary and environment to this JSON file")
      ("bounds", po::bool_switch(&with_bounds),
       "then measure this machine's forward cost c(n) in process (n = 1, 2, 4, ..., 64 at the shortest and longest "
       "cached lengths of the run) and print draftlab bounds' tables: τ from node values, the chain formula, "
       "Sequoia; the speedup the cost model predicts, Sequoia's bound, the perfect-drafter ceiling");
  SamplingFilterOptions filters;
  add_sampling_filter_options(desc, filters);

  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "compare", vm)) return 0;
  apply_sampling_filters(filters, c.runner.filters);
  check(seed >= 0, "--seed: expected >= 0");
  check(!c.prompts.empty() || !benches.empty(), "no prompts: give --prompt TEXT or --bench SET");
  c.datasets = benches;
  c.temperatures = {temperature};
  c.runner.seed = static_cast<uint64_t>(seed);
  c.command_line = recorded_command_line(argc, argv, vm);
  const ExperimentRun run = run_experiment_from_cli(c, model_opts, argc, argv, progress);
  const ResultsFile& results = run.results;
  const LlamaModel& target = *run.target;

  // What computes in what: the native path keeps its weights as stored and computes in float32; the reference path
  // computes in --dtype (its description says so).
  const std::string forward = target.path_description() + (target.native() ? ", float32 activations" : "");
  const int threads = at::get_num_threads();
  std::printf("model: %s (%.2fM parameters, %d thread%s)\nforward: %s\nblas: %s\ncpu: %s\n",
              model_opts.model_path.c_str(), target.num_parameters() / 1e6, threads, threads == 1 ? "" : "s",
              forward.c_str(), blas_description().c_str(), cpu_model_name().c_str());
  std::printf("max %ld new tokens, T=%g, %d repeats (median) after %d warm-up\n\n%s",
              static_cast<long>(c.runner.max_new_tokens), temperature, c.runner.repeats, c.runner.warmup,
              summary_table(results).c_str());
  const bool greedy = temperature == 0.0;
  const bool identical = all_identical(results);
  if (greedy) std::printf("\noutput identical to vanilla: %s\n", identical ? "yes, every method, every prompt" : "NO");

  analysis::CostModel cost;
  analysis::BoundsOptions options;
  if (with_bounds) {
    // The cost model of this very process (model, weights, threads, ISA): forwards after the shortest prompt and
    // after the longest prompt plus its answer, clamped to the context.
    cost.source = "measured in process";
    cost.description = forward + ", " + std::to_string(threads) + " thread(s)";
    const QuestionRows& q = results.runs.front().questions;
    int64_t shortest = q.size() ? q.prompt_tokens[0] : 0, longest = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      shortest = std::min<int64_t>(shortest, q.prompt_tokens[i]);
      longest = std::max<int64_t>(longest, q.prompt_tokens[i] + q.new_tokens[i]);
    }
    const int64_t room = target.config().max_position_embeddings - 64;
    for (int64_t cached : {std::min(shortest, room), std::min(longest, room)})
      if (cost.curves.empty() || cached > cost.curves.back().cached)
        cost.curves.push_back({cached, VerifyCost::measure(target, 64, cached, 5).points()});
    options.cost = &cost;
    std::printf("\n%s", analysis::render_text(analysis::bounds_report(results, "compare", options)).c_str());
  }
  if (!out_path.empty()) write_results(out_path, results);
  if (!json_path.empty()) write_file_atomically(json_path, summary_json(results, with_bounds ? &options : nullptr).dump(2) + "\n");
  // A lossless method that changes greedy output is a bug: make it visible to scripts.
  return greedy && !identical ? 3 : 0;
}

}  // namespace draftlab::cli
