// draftlab generate: decode a prompt, streaming text as it comes; vanilla by default, or any draft strategy
// through the speculative loop (--strategy), with tau and the draft/verify time split at the end.
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>

#include "core/base/error.h"
#include "core/base/platform.h"
#include "core/decoding/speculative_decoder.h"
#include "core/decoding/vanilla_decoder.h"
#include "core/text/chat_template.h"
#include "core/text/text_stream.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/model_loading.h"
#include "strategies/registry.h"

namespace po = boost::program_options;

namespace draftlab::cli {

namespace {

// --trace-drafts: the strategy as it is, each cycle's drafted tokens (tree order) and how many were accepted printed
// on stderr, in the form of spec-peer's SPEC_PEER_TRACE lines, so the two engines' drafts compare step by step.
class DraftTrace : public SequenceStrategy {
 public:
  explicit DraftTrace(std::unique_ptr<DraftStrategy> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  std::vector<int64_t> target_feature_layers() const override { return inner_->target_feature_layers(); }
  void begin(const std::vector<int64_t>& prompt, const at::Tensor& features, int64_t first) override {
    inner_->begin(prompt, features, first);
  }
  std::vector<int64_t> prefill_rows(const std::vector<int64_t>& prompt, int64_t max_rows) override {
    return inner_->prefill_rows(prompt, max_rows);
  }
  void observe_prefill_rows(const at::Tensor& logits) override { inner_->observe_prefill_rows(logits); }
  DraftTree propose(const DraftRequest& request) override {
    DraftTree tree = std::move(inner_->propose_batch({inner_.get()}, {request})[0]);
    std::fprintf(stderr, "[trace] step %d n_past %zu id_last %ld draft", step_, request.sequence.size() - 1,
                 static_cast<long>(request.sequence.back()));
    for (const DraftNode& n : tree.nodes()) std::fprintf(stderr, " %ld", static_cast<long>(n.token));
    return tree;
  }
  void observe(const VerifyResult& result) override {
    std::fprintf(stderr, " | ids");
    for (int64_t t : result.tokens) std::fprintf(stderr, " %ld", static_cast<long>(t));
    std::fprintf(stderr, " | accepted %zu\n", result.accepted_nodes.size());
    ++step_;
    inner_->observe_batch({inner_.get()}, {&result});
  }

 private:
  std::unique_ptr<DraftStrategy> inner_;
  int step_ = 0;
};

std::string strategy_help() {
  std::string s = "draft strategy (default: the plain vanilla loop; `draftlab strategies` lists their options):";
  for (const StrategyDescriptor* d : strategy_table()) s += "\n    " + d->name + ": " + d->summary;
  return s;
}

}  // namespace

int run_generate(int argc, char** argv) {
  ModelOptions model_opts;
  std::string prompt, strategy_name, chat_template = "plain";
  std::vector<std::string> strategy_opts;
  GenerationConfig gen;
  bool print_ids = false, trace_drafts = false;

  po::options_description desc("draftlab generate: decode a prompt and report tokens/s\n\noptions");
  add_model_options(desc, model_opts);
  desc.add_options()
      ("help,h", "show this help")
      ("prompt,p", po::value(&prompt)->required(), "prompt text (\"\" starts from BOS alone, as llama2.c does)")
      ("chat-template", po::value(&chat_template)->default_value(chat_template),
       "plain, vicuna, llama2-chat, llama3-instruct: wrap the prompt as one user turn")
      ("max-new-tokens,n", po::value(&gen.max_new_tokens)->default_value(128), "tokens to generate at most")
      ("temperature,t", po::value(&gen.sampling.temperature)->default_value(0.0), "0 = greedy")
      ("seed", po::value(&gen.seed)->default_value(0), "random seed (runs with the same seed repeat exactly)")
      ("context", po::value(&gen.context_limit)->default_value(0), "context limit (0 = the model's)")
      ("strategy,s", po::value(&strategy_name), strategy_help().c_str())
      ("opt,o", po::value(&strategy_opts)->composing(), "strategy option key=value (repeatable), e.g. -o depth=6")
      ("print-ids", po::bool_switch(&print_ids), "print prompt and generated token ids after the text")
      ("trace-drafts", po::bool_switch(&trace_drafts),
       "print every cycle's drafted tokens, the tokens it emitted and the accepted count on stderr (as llama.cpp "
       "spec-peer's SPEC_PEER_TRACE lines)");

  SamplingFilterOptions filters;
  add_sampling_filter_options(desc, filters);

  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "generate", vm)) return 0;
  apply_sampling_filters(filters, gen.sampling);
  if (!strategy_opts.empty() && strategy_name.empty()) throw Error("--opt given without --strategy");
  if (trace_drafts && strategy_name.empty()) throw Error("--trace-drafts given without --strategy");
  // Everything that needs no model, checked before it loads: the generation settings, the chat template, the
  // strategy's name and options (a misspelled key fails at once; resolved once, made from that after the load).
  check_generation_config(gen);
  parse_chat_template(chat_template);
  const StrategyDescriptor* descriptor = strategy_name.empty() ? nullptr : &find_strategy(strategy_name);
  const StrategyOptions resolved =
      descriptor ? resolve_options(*descriptor, StrategyOptions::parse(strategy_opts)) : StrategyOptions{};

  LoadedModel loaded = load_model_and_tokenizer(model_opts);
  const Tokenizer& tok = *loaded.tokenizer;
  const std::vector<int64_t> prompt_ids = encode_prompt(tok, prompt, chat_template);
  for (int32_t eos : loaded.model->config().eos_token_ids) gen.stop_tokens.push_back(eos);
  std::unique_ptr<DraftStrategy> strategy;
  if (descriptor) strategy = descriptor->make(StrategyContext{*loaded.model}, resolved);
  if (strategy && trace_drafts) strategy = std::make_unique<DraftTrace>(std::move(strategy));

  TextStream stream(tok);
  for (int64_t id : prompt_ids) std::cout << stream.push(static_cast<int32_t>(id));
  std::cout.flush();
  auto on_token = [&](int64_t id) {
    std::cout << stream.push(static_cast<int32_t>(id));
    std::cout.flush();
  };
  GenerationResult result;
  SpeculativeResult spec;
  if (strategy) {
    spec = SpeculativeDecoder(*loaded.model, *strategy).generate(prompt_ids, gen, on_token);
    result = spec;
  } else {
    result = generate_vanilla(*loaded.model, prompt_ids, gen, on_token);
  }
  std::cout << stream.finish() << "\n";

  if (print_ids) {
    std::cout << "prompt_ids";
    for (int64_t id : prompt_ids) std::cout << " " << id;
    std::cout << "\ngenerated_ids";
    for (int64_t id : result.tokens) std::cout << " " << id;
    std::cout << "\n";
  }
  std::fprintf(stderr, "[%zu prompt tokens, %zu generated, stop: %s] prefill %.1f ms, decode %.2f ms: %.1f tokens/s\n",
               prompt_ids.size(), result.tokens.size(), result.stop_reason.c_str(), result.prefill_seconds * 1e3,
               result.decode_seconds * 1e3, result.tokens_per_second());
  if (strategy) {
    int64_t drafted = 0, accepted = 0;
    for (const auto& c : spec.cycles) {
      drafted += c.drafted;
      accepted += c.accepted;
    }
    std::fprintf(stderr,
                 "[%s] %zu cycles, tau %.2f tokens/cycle, drafted %ld accepted %ld; time: draft %.2f ms, verify %.2f ms, "
                 "of which forwards %.2f ms; the rest %.1f us per cycle\n",
                 strategy->name().c_str(), spec.cycles.size(), spec.tau(), (long)drafted, (long)accepted,
                 spec.draft_seconds() * 1e3, spec.verify_seconds() * 1e3, spec.forward_seconds() * 1e3,
                 spec.overhead_per_cycle() * 1e6);
  }
  std::fprintf(stderr, "[memory] resident %.0f MB, peak %.0f MB\n", resident_memory_bytes() / 1048576.0,
               peak_resident_memory_bytes() / 1048576.0);
  return 0;
}

}  // namespace draftlab::cli
