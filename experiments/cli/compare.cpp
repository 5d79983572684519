// draftlab compare: draft strategies beside vanilla decoding on the same prompts, in one run.
//
// Method: every prompt is decoded by every method `--repeats` times after `--warmup` untimed runs, methods
// interleaved within each repeat (so drift in machine speed hits all methods alike); a method's time on a
// prompt is the median of its repeats (prefill included), its speed is total tokens / total median time, and
// speedup is vanilla's total time / its total time. At T = 0 each method's tokens are checked against vanilla's.
#include <ATen/Parallel.h>

#include <boost/program_options.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/base/platform.h"
#include "core/decoding/speculative_decoder.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/model_loading.h"
#include "strategies/registry.h"

namespace po = boost::program_options;

namespace draftlab::cli {

namespace {

struct Method {
  std::string label;  // as given: "eagle2:total_tokens=40,depth=5"
  std::string name;
  std::vector<std::string> options;
  std::unique_ptr<DraftStrategy> strategy;
  // Per prompt: median seconds, tokens, and the last run's statistics.
  std::vector<double> seconds;
  std::vector<std::vector<int64_t>> tokens;
  int64_t cycles = 0, accepted = 0, drafted = 0;
  double draft_s = 0, verify_s = 0;
  int identical = 0;
};

Method parse_method(const std::string& spec) {
  Method m;
  m.label = spec;
  auto colon = spec.find(':');
  m.name = spec.substr(0, colon);
  if (colon != std::string::npos) {
    std::string rest = spec.substr(colon + 1);
    size_t pos = 0;
    while (pos <= rest.size()) {
      auto comma = rest.find(',', pos);
      if (comma == std::string::npos) comma = rest.size();
      if (comma > pos) m.options.push_back(rest.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  return m;
}

std::vector<std::string> bench_first_turns(const std::string& set, int count) {
  const char* env = std::getenv("DRAFTLAB_SHARED");
  const std::string shared = env && *env ? env : "../shared";
  const std::string path = shared + "/data/bench/" + set + "/question.jsonl";
  std::ifstream in(path);
  if (!in) throw Error::at(path, "cannot open (set DRAFTLAB_SHARED to the shared folder; sets: mt_bench, humaneval, "
                                 "gsm8k, alpaca, sum, qa)");
  std::vector<std::string> out;
  std::string line;
  for (int lineno = 1; static_cast<int>(out.size()) < count && std::getline(in, line); ++lineno) {
    try {
      out.push_back(nlohmann::json::parse(line).at("turns").at(0).get<std::string>());
    } catch (const std::exception& e) {
      throw Error::at(path, "line " + std::to_string(lineno) + ": expected a JSON object with turns[0]: " + e.what());
    }
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int run_compare(int argc, char** argv) {
  ModelOptions model_opts;
  std::vector<std::string> prompts, benches, specs;
  std::string chat_template = "plain", json_path;
  int num_prompts = 5, repeats = 3, warmup = 1;
  int64_t max_prompt_tokens = 0;
  GenerationConfig gen;
  gen.max_new_tokens = 64;

  po::options_description desc(
      "draftlab compare: strategies beside vanilla on the same prompts (speed, speedup, tau, identical output)\n\n"
      "options");
  add_model_options(desc, model_opts);
  desc.add_options()
      ("help,h", "show this help")
      ("strategy,s", po::value(&specs)->composing(),
       "a method to compare, NAME or NAME:key=value,key=value (repeatable); vanilla always runs as the baseline")
      ("prompt,p", po::value(&prompts)->composing(), "a prompt (repeatable)")
      ("bench", po::value(&benches)->composing(),
       "a bench set from $DRAFTLAB_SHARED/data/bench (mt_bench, humaneval, gsm8k, alpaca, sum, qa): its first "
       "--num-prompts questions, first turn (repeatable)")
      ("num-prompts", po::value(&num_prompts)->default_value(num_prompts), "questions per --bench set")
      ("max-prompt-tokens", po::value(&max_prompt_tokens)->default_value(0),
       "cut longer prompts to this many tokens (0 = half the context)")
      ("chat-template", po::value(&chat_template)->default_value(chat_template), "plain, vicuna, llama2-chat, llama3-instruct")
      ("max-new-tokens,n", po::value(&gen.max_new_tokens)->default_value(gen.max_new_tokens), "tokens per prompt at most")
      ("temperature,t", po::value(&gen.sampling.temperature)->default_value(0.0), "0 = greedy")
      ("top-p", po::value(&gen.sampling.top_p)->default_value(1.0), "nucleus sampling mass")
      ("seed", po::value(&gen.seed)->default_value(0), "random seed")
      ("repeats", po::value(&repeats)->default_value(repeats), "timed runs per prompt and method (median)")
      ("warmup", po::value(&warmup)->default_value(warmup), "untimed runs per method first")
      ("json", po::value(&json_path), "also write the results and environment to this JSON file");
  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "compare", vm)) return 0;
  check(repeats >= 1, "--repeats: expected >= 1, got " + std::to_string(repeats));
  check(warmup >= 0, "--warmup: expected >= 0, got " + std::to_string(warmup));

  LoadedModel loaded = load_model_and_tokenizer(model_opts);
  const LlamaModel& target = *loaded.model;
  for (const auto& b : benches)
    for (auto& t : bench_first_turns(b, num_prompts)) prompts.push_back(t);
  check(!prompts.empty(), "no prompts: give --prompt TEXT or --bench SET");
  const int64_t context = target.config().max_position_embeddings;
  if (max_prompt_tokens <= 0) max_prompt_tokens = context / 2;
  std::vector<std::vector<int64_t>> prompt_ids;
  int cut = 0;
  for (const auto& p : prompts) {
    auto ids = encode_prompt(*loaded.tokenizer, p, chat_template);
    if (static_cast<int64_t>(ids.size()) > max_prompt_tokens) {
      ids.resize(max_prompt_tokens);
      ++cut;
    }
    prompt_ids.push_back(ids);
  }
  for (int32_t eos : target.config().eos_token_ids) gen.stop_tokens.push_back(eos);

  std::vector<Method> methods;
  methods.push_back(parse_method("vanilla"));
  for (const auto& s : specs) methods.push_back(parse_method(s));
  for (auto& m : methods) {
    m.strategy = make_strategy(m.name, StrategyContext{target}, StrategyOptions::parse(m.options));
    m.seconds.resize(prompt_ids.size());
    m.tokens.resize(prompt_ids.size());
  }

  auto run_once = [&](Method& m, const std::vector<int64_t>& ids) {
    SpeculativeDecoder decoder(target, *m.strategy);
    return decoder.generate(ids, gen);
  };
  for (auto& m : methods)
    for (int w = 0; w < warmup; ++w) run_once(m, prompt_ids[0]);

  for (size_t p = 0; p < prompt_ids.size(); ++p) {
    std::vector<std::vector<double>> times(methods.size());
    for (int r = 0; r < repeats; ++r) {
      for (size_t k = 0; k < methods.size(); ++k) {
        Method& m = methods[k];
        auto res = run_once(m, prompt_ids[p]);
        times[k].push_back(res.prefill_seconds + res.decode_seconds);
        if (r == repeats - 1) {
          m.tokens[p] = res.tokens;
          m.cycles += static_cast<int64_t>(res.cycles.size());
          for (const auto& c : res.cycles) {
            m.accepted += c.accepted;
            m.drafted += c.drafted;
          }
          m.draft_s += res.draft_seconds();
          m.verify_s += res.verify_seconds();
        }
      }
    }
    for (size_t k = 0; k < methods.size(); ++k) {
      methods[k].seconds[p] = median(times[k]);
      if (methods[k].tokens[p] == methods[0].tokens[p]) ++methods[k].identical;
    }
    if (isatty(fileno(stderr)))
      std::fprintf(stderr, "\rprompt %zu/%zu", p + 1, prompt_ids.size());
  }
  if (isatty(fileno(stderr))) std::fprintf(stderr, "\r\033[K");

  const bool greedy = gen.sampling.greedy();
  auto total = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s;
  };
  const double vanilla_s = total(methods[0].seconds);
  std::printf("model: %s (%.2fM parameters, %s, %d threads)\nforward: %s\nblas: %s\ncpu: %s\n",
              model_opts.model_path.c_str(), target.num_parameters() / 1e6, model_opts.dtype.c_str(),
              at::get_num_threads(), target.path_description().c_str(), blas_description().c_str(),
              cpu_model_name().c_str());
  std::printf("%zu prompts (%d cut to %ld tokens), max %ld new tokens, T=%.2f, %d repeats (median) after %d warm-up\n\n",
              prompt_ids.size(), cut, (long)max_prompt_tokens, (long)gen.max_new_tokens, gen.sampling.temperature,
              repeats, warmup);
  std::printf("%-34s %10s %8s %6s %9s %7s %7s %10s\n", "method", "tokens/s", "speedup", "tau", "drafted/c", "draft%",
              "verify%", "identical");
  nlohmann::json rows = nlohmann::json::array();
  for (auto& m : methods) {
    int64_t ntok = 0;
    for (const auto& t : m.tokens) ntok += static_cast<int64_t>(t.size());
    const double secs = total(m.seconds);
    const double tau = m.cycles ? static_cast<double>(m.accepted + m.cycles) / m.cycles : 0.0;
    const double busy = m.draft_s + m.verify_s;
    const std::string ident = greedy ? std::to_string(m.identical) + "/" + std::to_string(prompt_ids.size()) : "n/a (T>0)";
    std::printf("%-34s %10.1f %7.2fx %6.2f %9.1f %6.1f%% %6.1f%% %10s\n", m.label.c_str(), ntok / secs, vanilla_s / secs,
                tau, m.cycles ? static_cast<double>(m.drafted) / m.cycles : 0.0, busy > 0 ? 100 * m.draft_s / busy : 0.0,
                busy > 0 ? 100 * m.verify_s / busy : 0.0, ident.c_str());
    rows.push_back({{"method", m.label}, {"tokens", ntok}, {"seconds", secs}, {"tokens_per_second", ntok / secs},
                    {"speedup", vanilla_s / secs}, {"tau", tau}, {"cycles", m.cycles}, {"drafted", m.drafted},
                    {"accepted", m.accepted}, {"draft_seconds", m.draft_s}, {"verify_seconds", m.verify_s},
                    {"identical_to_vanilla", greedy ? nlohmann::json(m.identical) : nlohmann::json(nullptr)}});
  }
  bool all_identical = true;
  for (const auto& m : methods) all_identical = all_identical && m.identical == static_cast<int>(prompt_ids.size());
  if (greedy) std::printf("\noutput identical to vanilla: %s\n", all_identical ? "yes, every method, every prompt" : "NO");

  if (!json_path.empty()) {
    std::time_t now = std::time(nullptr);
    char date[64];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    nlohmann::json j = {{"command", "compare"},     {"model", model_opts.model_path},
                        {"dtype", model_opts.dtype}, {"threads", at::get_num_threads()},
                        {"forward", target.path_description()},
                        {"blas", blas_description()}, {"cpu", cpu_model_name()},
                        {"date", date},             {"prompts", prompt_ids.size()},
                        {"max_new_tokens", gen.max_new_tokens}, {"temperature", gen.sampling.temperature},
                        {"repeats", repeats},        {"warmup", warmup},
                        {"methods", rows}};
    write_file_atomically(json_path, j.dump(2) + "\n");
  }
  // A lossless method that changes greedy output is a bug: make it visible to scripts.
  return greedy && !all_identical ? 3 : 0;
}

}  // namespace draftlab::cli
