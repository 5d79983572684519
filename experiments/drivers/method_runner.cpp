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

void plan_method(MethodSpec& method) {
  const StrategyDescriptor& d = find_strategy(method.strategy);
  StrategyOptions given;
  for (const auto& [key, value] : method.options) given.set(key, value);
  method.resolved = resolve_options(d, given);
  method.descriptor = &d;
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
  std::vector<std::unique_ptr<DraftStrategy>> strategies;  // one per sequence of a batch
  bool has_confidence = false;  // its descriptor's: records carry draft probabilities
  RunRecord run;
};

void append_result(RunRecord& run, const BenchQuestion& q, int turn, int32_t prompt_tokens, double wall,
                   const SpeculativeResult& res, int8_t identical, const std::string& answer, bool has_confidence,
                   const std::vector<CycleStats>& oracle) {
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
  OracleRows& o = run.oracle;
  for (size_t c = 0; c < oracle.size(); ++c) {
    o.question.push_back(row);
    o.position.push_back(static_cast<int32_t>(c));
    o.matched.push_back(oracle[c].matched);
    o.drafted.push_back(oracle[c].drafted);
  }
}

void finish_run(RunRecord& run) {
  run.tokens_per_second = analysis::tokens_per_second(run);
  run.tau = run.cycles.size() ? analysis::tau(run) : 0.0;
}

// Checks the settings against the target; returns the longest prompt (tokens) that leaves room for the answer.
int64_t checked_prompt_limit(const LlamaModel& target, const std::vector<MethodSpec>& methods,
                             const RunnerSettings& settings) {
  check(!methods.empty() && methods[0].strategy == baseline_strategy().name,
        "experiment: the first method must be the baseline, " + baseline_strategy().name);
  check(settings.batch_size >= 1, "--batch-sizes: expected >= 1, got " + std::to_string(settings.batch_size));
  check(settings.repeats >= 1, "--repeats: expected >= 1, got " + std::to_string(settings.repeats));
  check(settings.warmup >= 0, "--warmup: expected >= 0, got " + std::to_string(settings.warmup));
  check(settings.max_new_tokens >= 1, "--max-new-tokens: expected >= 1, got " + std::to_string(settings.max_new_tokens));
  const int64_t context = target.config().max_position_embeddings;
  if (context - settings.max_new_tokens < 1)
    throw Error("--max-new-tokens: expected less than the model's context (" + std::to_string(context) +
                " positions) to leave room for a prompt, got " + std::to_string(settings.max_new_tokens));
  check(settings.max_prompt_tokens >= 0, "--max-prompt-tokens: expected >= 0, got " + std::to_string(settings.max_prompt_tokens));
  return settings.max_prompt_tokens > 0 ? std::min(settings.max_prompt_tokens, context - settings.max_new_tokens)
                                        : context - settings.max_new_tokens;
}

GenerationConfig generation_config(const LlamaModel& target, const RunnerSettings& settings, double temperature) {
  GenerationConfig gen;
  gen.max_new_tokens = settings.max_new_tokens;
  gen.sampling = settings.filters;
  gen.sampling.temperature = temperature;
  gen.sampling.validate();
  if (!settings.ignore_eos)
    for (int32_t eos : target.config().eos_token_ids) gen.stop_tokens.push_back(eos);
  return gen;
}

// Each method's strategies (one per sequence of a batch) and its run record's header.
std::vector<MethodState> start_methods(const LlamaModel& target, const std::vector<MethodSpec>& methods,
                                       const std::string& dataset, double temperature,
                                       const RunnerSettings& settings) {
  std::vector<MethodState> state(methods.size());
  for (size_t m = 0; m < methods.size(); ++m) {
    const MethodSpec& spec = methods[m];
    check(spec.descriptor != nullptr, "experiment: method " + spec.label + " was not planned (plan_method)");
    const StrategyDescriptor& strategy = *spec.descriptor;
    state[m].spec = &spec;
    state[m].has_confidence = strategy.has_confidence;
    for (int64_t b = 0; b < settings.batch_size; ++b)
      state[m].strategies.push_back(strategy.make(StrategyContext{target}, spec.resolved));
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
    r.batch_size = settings.batch_size;
  }
  return state;
}

// One question turn of one method, kept until its group is done (rows are appended in question order).
struct Turn {
  size_t question;
  size_t turn;
  int32_t prompt_tokens;
  double wall;
  SpeculativeResult result;
  int8_t identical;
  std::string answer;
  std::vector<CycleStats> oracle;  // the --oracle generation's cycles, one per position (empty without one)
};

// What every group of questions of one run_methods call shares.
struct Experiment {
  const LlamaModel& target;
  const Tokenizer& tokenizer;
  const std::vector<MethodSpec>& methods;
  const std::string& dataset;
  const std::vector<BenchQuestion>& questions;
  double temperature;
  const RunnerSettings& settings;
  const ProgressCallback& progress;
  GenerationConfig gen;
  ChatTemplate chat;
  int64_t prompt_limit;
  std::vector<int64_t> first_turn_row;  // question turn r (every question's turns in order) samples with seed + r
  std::vector<MethodState> state;
};

// Consecutive questions decoded together, turn by turn (a question with fewer turns leaves the batch).
class QuestionGroup {
 public:
  QuestionGroup(Experiment& x, size_t g0, size_t g1)
      : x_(x), g0_(g0), g1_(g1), history_(x.methods.size(), std::vector<std::vector<ChatMessage>>(g1 - g0)),
        done_(x.methods.size()) {}

  void run() {
    size_t turns = 0;
    for (size_t qi = g0_; qi < g1_; ++qi) turns = std::max(turns, x_.questions[qi].turns.size());
    for (size_t t = 0; t < turns; ++t) run_turn(t);
    for (size_t m = 0; m < x_.methods.size(); ++m) {
      std::stable_sort(done_[m].begin(), done_[m].end(),
                       [](const Turn& a, const Turn& b) { return a.question < b.question; });
      for (const Turn& d : done_[m])
        append_result(x_.state[m].run, x_.questions[d.question], static_cast<int>(d.turn), d.prompt_tokens, d.wall,
                      d.result, d.identical, d.answer, x_.state[m].has_confidence, d.oracle);
    }
  }

 private:
  using Prompts = std::vector<std::vector<int64_t>>;  // per member of the turn

  // Turn t of every question that has one: every method's warm-up runs, then the repeats with the methods
  // interleaved; the median wall time and the last repeat's results are kept.
  void run_turn(size_t t) {
    members_.clear();
    for (size_t qi = g0_; qi < g1_; ++qi)
      if (t < x_.questions[qi].turns.size()) members_.push_back(qi);
    const size_t M = x_.methods.size();
    std::vector<Prompts> prompts(M);
    for (size_t m = 0; m < M; ++m) prompts[m] = turn_prompts(m, t);
    std::vector<SpeculativeResult> scratch;
    for (size_t m = 0; m < M; ++m)
      for (int w = 0; w < x_.settings.warmup; ++w) generate(m, t, prompts[m], scratch);
    std::vector<std::vector<double>> times(M);
    std::vector<std::vector<SpeculativeResult>> last(M);
    for (int r = 0; r < x_.settings.repeats; ++r)
      for (size_t m = 0; m < M; ++m) {
        times[m].push_back(generate(m, t, prompts[m], scratch));
        if (r == x_.settings.repeats - 1) last[m] = std::move(scratch);
      }
    std::vector<std::vector<SpeculativeResult>> oracle(M);
    if (x_.settings.oracle && x_.gen.sampling.greedy())
      for (size_t m = 1; m < M; ++m) oracle_generation(m, t, prompts[m], last[m], oracle[m]);
    for (size_t m = 0; m < M; ++m) keep(m, t, prompts[m], median(times[m]), last, oracle[m]);
    report(t, last);
  }

  // --oracle: method m's turn once more, untimed, committing one token per cycle (every answer position a cycle
  // start; CycleStats::matched its oracle draft length). The commit limit is lossless, so the tokens must be the
  // method's own: anything else is a bug, reported as one.
  void oracle_generation(size_t m, size_t t, const Prompts& prompts, const std::vector<SpeculativeResult>& own,
                         std::vector<SpeculativeResult>& results) {
    generate(m, t, prompts, results, /*commit_limit=*/0);
    for (size_t k = 0; k < members_.size(); ++k)
      if (results[k].tokens != own[k].tokens)
        throw Error("--oracle: method " + x_.methods[m].label + ", question " +
                    std::to_string(x_.questions[members_[k]].id) + " turn " + std::to_string(t + 1) +
                    ": committing one token per cycle changed the greedy output (a lossless bug)");
  }

  // Prompts: the chat template over method m's conversation so far, cut from the left to fit the context.
  Prompts turn_prompts(size_t m, size_t t) {
    Prompts prompts(members_.size());
    for (size_t k = 0; k < members_.size(); ++k) {
      const BenchQuestion& q = x_.questions[members_[k]];
      auto& conversation = history_[m][members_[k] - g0_];
      conversation.push_back({"user", q.turns[t]});
      const std::string text = render_chat(x_.chat, conversation, /*add_generation_prompt=*/true);
      const auto ids = x_.tokenizer.encode(text, /*add_bos=*/x_.chat != ChatTemplate::Llama3Instruct);
      if (ids.empty())
        throw Error(bench_question_path(x_.dataset) + ": question " + std::to_string(q.id) +
                    ": the prompt encodes to no tokens and the tokenizer has no BOS");
      const size_t keep = std::min<size_t>(ids.size(), static_cast<size_t>(x_.prompt_limit));
      prompts[k].assign(ids.end() - static_cast<std::ptrdiff_t>(keep), ids.end());
    }
    return prompts;
  }

  // One generation of the turn's members by method m: each member's result; returns the wall time of the whole.
  double generate(size_t m, size_t t, const Prompts& prompts, std::vector<SpeculativeResult>& results,
                  int32_t commit_limit = -1) {
    std::vector<BatchSequence> sequences;
    std::vector<DraftStrategy*> strategies;
    for (size_t k = 0; k < members_.size(); ++k) {
      sequences.push_back({prompts[k], x_.settings.seed + static_cast<uint64_t>(x_.first_turn_row[members_[k]] + t)});
      strategies.push_back(x_.state[m].strategies[k].get());
    }
    SpeculativeDecoder decoder(x_.target, strategies);
    decoder.set_commit_limit(commit_limit);
    BatchResult batch = decoder.generate(sequences, x_.gen);
    results = std::move(batch.sequences);
    return batch.prefill_seconds + batch.decode_seconds;
  }

  // Method m's results of the turn, with the answers its next turn sees. A batch's wall time goes to its members
  // in proportion to their new tokens (equal shares when none produced any), so a run's summed wall_seconds stay
  // its wall time and tokens / seconds its throughput.
  void keep(size_t m, size_t t, const Prompts& prompts, double wall,
            const std::vector<std::vector<SpeculativeResult>>& last, const std::vector<SpeculativeResult>& oracle) {
    const size_t B = members_.size();
    int64_t batch_tokens = 0;
    for (const auto& res : last[m]) batch_tokens += static_cast<int64_t>(res.tokens.size());
    for (size_t k = 0; k < B; ++k) {
      const SpeculativeResult& res = last[m][k];
      const int8_t identical = x_.gen.sampling.greedy() && m > 0 ? (res.tokens == last[0][k].tokens ? 1 : 0) : -1;
      std::vector<int32_t> ids(res.tokens.begin(), res.tokens.end());
      // Valid UTF-8 (the answer column is an HDF5 UTF-8 string); the next turn's prompt sees the same text, as
      // in the papers' scripts, whose decode replaces a character cut by the token budget with U+FFFD.
      const std::string answer = decode_utf8(x_.tokenizer, ids);
      history_[m][members_[k] - g0_].push_back({"assistant", answer});
      const double share = batch_tokens > 0 ? static_cast<double>(res.tokens.size()) / batch_tokens
                                            : 1.0 / static_cast<double>(B);
      done_[m].push_back({members_[k], t, static_cast<int32_t>(prompts[k].size()), wall * share, res, identical,
                          answer, oracle.empty() ? std::vector<CycleStats>{} : oracle[k].cycles});
    }
  }

  // A progress line per member: each method's tau, and DIFFERS where greedy tokens left the baseline's.
  void report(size_t t, const std::vector<std::vector<SpeculativeResult>>& last) const {
    if (!x_.progress) return;
    for (size_t k = 0; k < members_.size(); ++k) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s T=%g question %zu/%zu turn %zu:", x_.dataset.c_str(), x_.temperature,
                    members_[k] + 1, x_.questions.size(), t + 1);
      std::string line = buf;
      if (x_.settings.batch_size > 1) line += " (batch of " + std::to_string(members_.size()) + ")";
      for (size_t m = 1; m < x_.methods.size(); ++m) {
        const SpeculativeResult& res = last[m][k];
        const bool differs = x_.gen.sampling.greedy() && res.tokens != last[0][k].tokens;
        std::snprintf(buf, sizeof buf, " %s tau %.2f%s", x_.methods[m].label.c_str(), res.tau(),
                      differs ? " DIFFERS" : "");
        line += buf;
      }
      x_.progress(line);
    }
  }

  Experiment& x_;
  const size_t g0_, g1_;
  std::vector<std::vector<std::vector<ChatMessage>>> history_;  // per method, per question of the group
  std::vector<std::vector<Turn>> done_;                          // per method
  std::vector<size_t> members_;                                  // this turn's questions
};

}  // namespace

std::vector<RunRecord> run_methods(const LlamaModel& target, const Tokenizer& tokenizer,
                                   const std::vector<MethodSpec>& methods, const std::string& dataset,
                                   const std::vector<BenchQuestion>& questions, double temperature,
                                   const RunnerSettings& settings, const ProgressCallback& progress) {
  const int64_t prompt_limit = checked_prompt_limit(target, methods, settings);
  Experiment x{target,   tokenizer,
               methods,  dataset,
               questions, temperature,
               settings, progress,
               generation_config(target, settings, temperature), parse_chat_template(settings.chat_template),
               prompt_limit, std::vector<int64_t>(questions.size(), 0),
               start_methods(target, methods, dataset, temperature, settings)};
  for (size_t qi = 1; qi < questions.size(); ++qi)
    x.first_turn_row[qi] = x.first_turn_row[qi - 1] + static_cast<int64_t>(questions[qi - 1].turns.size());
  const auto batch_size = static_cast<size_t>(settings.batch_size);
  for (size_t g0 = 0; g0 < questions.size(); g0 += batch_size)
    QuestionGroup(x, g0, std::min(questions.size(), g0 + batch_size)).run();
  std::vector<RunRecord> out;
  for (auto& s : x.state) {
    finish_run(s.run);
    out.push_back(std::move(s.run));
  }
  return out;
}

}  // namespace draftlab
