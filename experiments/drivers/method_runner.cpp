#include "experiments/drivers/method_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/decoding/speculative_decoder.h"
#include "core/text/chat_template.h"
#include "core/text/text_stream.h"
#include "analysis/run_metrics.h"
#include "strategies/registry.h"

namespace draftlab {

std::string MethodSpec::option(const std::string& key) const {
  for (const auto& [k, v] : options)
    if (k == key) return v;
  return "";
}

void MethodSpec::set_option(const std::string& key, const std::string& value) {
  for (auto& [k, v] : options)
    if (k == key) {
      v = value;
      return;
    }
  options.emplace_back(key, value);
}

std::string MethodSpec::options_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [k, v] : options) j[k] = v;
  return j.dump();
}

MethodSpec parse_method_spec(const std::string& text, const std::string& flag) {
  const StrategySpec spec = parse_strategy_spec(text, flag);
  MethodSpec m{text, spec.name, {}, ""};
  for (const auto& [k, v] : spec.options) {
    // `label` names the method in tables instead of the text itself; it is not a strategy option.
    if (k == "label")
      m.label = v;
    else
      m.options.emplace_back(k, v);
  }
  return m;
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One method while it runs: its strategy, its own answers so far (for later turns) and its growing run record.
struct MethodState {
  const MethodSpec* spec = nullptr;
  std::unique_ptr<DraftStrategy> strategy;
  RunRecord run;
};

void append_result(RunRecord& run, const BenchQuestion& q, int turn, int32_t prompt_tokens, double wall,
                   const SpeculativeResult& res, int8_t identical, const std::string& answer, bool has_confidence) {
  QuestionRows& qr = run.questions;
  CycleRows& cr = run.cycles;
  NodeRows& nr = run.nodes;
  const int32_t row = static_cast<int32_t>(qr.size());
  const int64_t first_cycle = static_cast<int64_t>(cr.size());
  qr.question_id.push_back(q.id);
  qr.category.push_back(q.category);
  qr.turn.push_back(turn);
  qr.prompt_tokens.push_back(prompt_tokens);
  qr.new_tokens.push_back(static_cast<int32_t>(res.tokens.size()));
  qr.wall_seconds.push_back(wall);
  qr.cycles.push_back(static_cast<int32_t>(res.cycles.size()));
  qr.draft_seconds.push_back(res.draft_seconds());
  qr.verify_seconds.push_back(res.verify_seconds());
  qr.cycle_offset.push_back(first_cycle);
  qr.identical.push_back(identical);
  qr.answer.push_back(answer);

  size_t k = 0;  // next record
  for (size_t c = 0; c < res.cycles.size(); ++c) {
    const CycleStats& s = res.cycles[c];
    cr.question.push_back(row);
    cr.accept_length.push_back(s.accepted + 1);
    cr.drafted.push_back(s.drafted);
    cr.draft_seconds.push_back(s.draft_seconds);
    cr.verify_seconds.push_back(s.verify_seconds);
    cr.experts_read.push_back(s.experts_read);
    cr.node_offset.push_back(static_cast<int64_t>(nr.size()));
    for (; k < res.records.size() && res.record_cycle[k] == static_cast<int32_t>(c); ++k) {
      const NodeRecord& n = res.records[k];
      nr.cycle.push_back(first_cycle + static_cast<int64_t>(c));
      nr.depth.push_back(n.depth);
      nr.tree_index.push_back(n.tree_index);
      nr.parent.push_back(n.parent);
      nr.sibling_rank.push_back(n.sibling_rank);
      // Strategies that declare no draft probabilities (model-free drafts) record NaN, not their placeholder.
      nr.confidence.push_back(has_confidence ? n.confidence : std::numeric_limits<float>::quiet_NaN());
      nr.value.push_back(has_confidence ? n.value : std::numeric_limits<float>::quiet_NaN());
      nr.accepted.push_back(n.accepted ? 1 : 0);
    }
  }
}

void finish_run(RunRecord& run) {
  run.tokens_per_second = analysis::tokens_per_second(run);
  run.tau = run.cycles.size() ? analysis::tau(run) : 0.0;
}

}  // namespace

std::vector<RunRecord> run_methods(const LlamaModel& target, const Tokenizer& tokenizer,
                                   const std::vector<MethodSpec>& methods, const std::string& dataset,
                                   const std::vector<BenchQuestion>& questions, double temperature,
                                   const RunnerSettings& settings, const ProgressCallback& progress) {
  check(!methods.empty() && methods[0].strategy == baseline_strategy().name,
        "experiment: the first method must be the baseline, " + baseline_strategy().name);
  check(settings.repeats >= 1, "--repeats: expected >= 1, got " + std::to_string(settings.repeats));
  check(settings.warmup >= 0, "--warmup: expected >= 0, got " + std::to_string(settings.warmup));
  check(settings.max_new_tokens >= 1, "--max-new-tokens: expected >= 1, got " + std::to_string(settings.max_new_tokens));
  const int64_t context = target.config().max_position_embeddings;
  if (context - settings.max_new_tokens < 1)
    throw Error("--max-new-tokens: expected less than the model's context (" + std::to_string(context) +
                " positions) to leave room for a prompt, got " + std::to_string(settings.max_new_tokens));
  check(settings.max_prompt_tokens >= 0, "--max-prompt-tokens: expected >= 0, got " + std::to_string(settings.max_prompt_tokens));
  const int64_t prompt_limit = settings.max_prompt_tokens > 0
                                   ? std::min(settings.max_prompt_tokens, context - settings.max_new_tokens)
                                   : context - settings.max_new_tokens;
  const ChatTemplate chat = parse_chat_template(settings.chat_template);

  GenerationConfig gen;
  gen.max_new_tokens = settings.max_new_tokens;
  gen.sampling.temperature = temperature;
  gen.sampling.top_p = settings.top_p;
  gen.sampling.validate();
  if (!settings.ignore_eos)
    for (int32_t eos : target.config().eos_token_ids) gen.stop_tokens.push_back(eos);
  const bool greedy = gen.sampling.greedy();

  std::vector<MethodState> state(methods.size());
  std::vector<bool> has_confidence(methods.size());
  for (size_t m = 0; m < methods.size(); ++m) {
    const MethodSpec& spec = methods[m];
    const StrategyDescriptor& strategy = find_strategy(spec.strategy);
    has_confidence[m] = strategy.has_confidence;
    std::vector<std::string> items;
    for (const auto& [k, v] : spec.options) items.push_back(k + "=" + v);
    state[m].spec = &spec;
    state[m].strategy = make_strategy(spec.strategy, StrategyContext{target}, StrategyOptions::parse(items));
    RunRecord& r = state[m].run;
    r.method = spec.label;
    r.strategy = spec.strategy;
    r.draft_shape = shape_name(strategy.shape);
    r.options_json = spec.options_json();
    r.dataset = dataset;
    r.temperature = temperature;
    r.repeats = settings.repeats;
    r.warmup = settings.warmup;
    r.grid_json = spec.grid_json;
    r.shard = settings.shard;
  }

  int64_t turn_row = 0;
  for (size_t qi = 0; qi < questions.size(); ++qi) {
    const BenchQuestion& q = questions[qi];
    std::vector<std::vector<ChatMessage>> history(methods.size());  // each method's own conversation so far
    for (size_t t = 0; t < q.turns.size(); ++t, ++turn_row) {
      gen.seed = settings.seed + static_cast<uint64_t>(turn_row);
      // Prompts: the chat template over the conversation, cut from the left to fit the context.
      std::vector<std::vector<int64_t>> prompts(methods.size());
      for (size_t m = 0; m < methods.size(); ++m) {
        history[m].push_back({"user", q.turns[t]});
        const std::string text = render_chat(chat, history[m], /*add_generation_prompt=*/true);
        const auto ids = tokenizer.encode(text, /*add_bos=*/chat != ChatTemplate::Llama3Instruct);
        if (ids.empty())
          throw Error(bench_question_path(dataset) + ": question " + std::to_string(q.id) +
                      ": the prompt encodes to no tokens and the tokenizer has no BOS");
        const size_t keep = std::min<size_t>(ids.size(), static_cast<size_t>(prompt_limit));
        prompts[m].assign(ids.end() - static_cast<std::ptrdiff_t>(keep), ids.end());
      }
      auto generate = [&](size_t m) {
        SpeculativeDecoder decoder(target, *state[m].strategy);
        return decoder.generate(prompts[m], gen);
      };
      for (size_t m = 0; m < methods.size(); ++m)
        for (int w = 0; w < settings.warmup; ++w) generate(m);
      std::vector<std::vector<double>> times(methods.size());
      std::vector<SpeculativeResult> last(methods.size());
      for (int r = 0; r < settings.repeats; ++r)
        for (size_t m = 0; m < methods.size(); ++m) {
          SpeculativeResult res = generate(m);
          times[m].push_back(res.prefill_seconds + res.decode_seconds);
          if (r == settings.repeats - 1) last[m] = std::move(res);
        }
      std::string line;
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s T=%g question %zu/%zu turn %zu:", dataset.c_str(), temperature, qi + 1,
                    questions.size(), t + 1);
      line = buf;
      for (size_t m = 0; m < methods.size(); ++m) {
        const SpeculativeResult& res = last[m];
        const int8_t identical = greedy && m > 0 ? (res.tokens == last[0].tokens ? 1 : 0) : -1;
        std::vector<int32_t> ids(res.tokens.begin(), res.tokens.end());
        // Valid UTF-8 (the answer column is an HDF5 UTF-8 string); the next turn's prompt sees the same text, as
        // in the papers' scripts, whose decode replaces a character cut by the token budget with U+FFFD.
        const std::string answer = decode_utf8(tokenizer, ids);
        history[m].push_back({"assistant", answer});
        const double wall = median(times[m]);
        append_result(state[m].run, q, static_cast<int>(t), static_cast<int32_t>(prompts[m].size()), wall, res,
                      identical, answer, has_confidence[m]);
        if (m > 0) {
          std::snprintf(buf, sizeof buf, " %s tau %.2f%s", methods[m].label.c_str(), res.tau(),
                        identical == 0 ? " DIFFERS" : "");
          line += buf;
        }
      }
      if (progress) progress(line);
    }
  }
  std::vector<RunRecord> out;
  for (auto& s : state) {
    finish_run(s.run);
    out.push_back(std::move(s.run));
  }
  return out;
}

}  // namespace draftlab
