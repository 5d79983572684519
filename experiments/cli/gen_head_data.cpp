// draftlab gen-head-data: target-generated training data for an EAGLE head (EAGLE paper Table 6, "data generated
// by target LLM"): the target continues each prompt with vanilla decoding (greedy, or sampled with --temperature
// and --seed), and the prompts with their continuations are written for `train-head --data` (token lines with the
// prompt masked out of the loss, or plain text stories). core/training/head_data.h documents the formats.
#include <unistd.h>

#include <boost/program_options.hpp>

#include <chrono>
#include <cstdio>

#include "core/base/error.h"
#include "core/decoding/vanilla_decoder.h"
#include "core/text/chat_template.h"
#include "core/training/head_data.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/data_parallel_options.h"
#include "experiments/cli/model_loading.h"

namespace po = boost::program_options;

namespace draftlab::cli {

int run_gen_head_data(int argc, char** argv) {
  ModelOptions mo;
  std::string prompts_path, corpus, out, format_name = "auto", chat_template = "plain";
  int64_t prompt_tokens = 16, max_prompts = 0, validation_every = 50, batch = 1;
  bool quiet = false;
  DataParallelFlags dist;
  GenerationConfig gen;
  gen.max_new_tokens = 128;

  po::options_description desc(
      "draftlab gen-head-data: continue prompts with the target (vanilla decoding) and write EAGLE head training "
      "data\n\noptions");
  desc.add_options()("help,h", "show this help");
  add_model_options(desc, mo);
  desc.add_options()
      ("prompts", po::value(&prompts_path),
       "prompt file: one prompt per line, or a bench question.jsonl (the first turn of each question)")
      ("corpus", po::value(&corpus), "or: story openings from a corpus (stories separated by blank lines)")
      ("prompt-tokens", po::value(&prompt_tokens)->default_value(prompt_tokens),
       "with --corpus: tokens of each story's opening (after BOS)")
      ("max-prompts", po::value(&max_prompts)->default_value(max_prompts), "use at most this many prompts (0: all)")
      ("validation-every", po::value(&validation_every)->default_value(validation_every),
       "with --corpus: skip every N-th story (the corpus' validation split, as train-head splits it)")
      ("chat-template", po::value(&chat_template)->default_value(chat_template),
       "with --prompts: wrap each prompt as one user turn (plain, vicuna, llama2-chat, llama3-instruct)")
      ("out", po::value(&out)->required(), "output file (written atomically)")
      ("format", po::value(&format_name)->default_value(format_name),
       "tokens (\"prompt ids | continuation ids\" per line; the loss skips the prompt), text (stories separated by "
       "blank lines) or auto (*.txt text, else tokens)")
      ("max-new-tokens,n", po::value(&gen.max_new_tokens)->default_value(gen.max_new_tokens),
       "tokens to generate per prompt at most (generation also stops at EOS and BOS)")
      ("temperature,t", po::value(&gen.sampling.temperature)->default_value(0.0), "0 = greedy")
      ("seed", po::value(&gen.seed)->default_value(0), "random seed; prompt i samples with seed + i")
      ("batch", po::value(&batch)->default_value(batch),
       "prompts decoded together (one forward per step for all; the same continuations as one at a time)")
      ("quiet", po::bool_switch(&quiet), "no progress line");

  SamplingFilterOptions filters;
  add_sampling_filter_options(desc, filters);
  add_data_parallel_options(desc, dist);

  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "gen-head-data", vm)) return 0;
  apply_sampling_filters(filters, gen.sampling);
  check(prompts_path.empty() != corpus.empty(), "gen-head-data: expected exactly one of --prompts and --corpus");
  const bool text_out = format_name == "text" || (format_name == "auto" && out.size() >= 4 &&
                                                  out.compare(out.size() - 4, 4, ".txt") == 0);
  check(format_name == "auto" || format_name == "text" || format_name == "tokens",
        "--format: expected auto, text or tokens, got " + format_name);
  check(max_prompts >= 0, "--max-prompts: expected 0 (all) or a positive number, got " + std::to_string(max_prompts));
  check(batch >= 1, "--batch: expected >= 1, got " + std::to_string(batch));
  if (!corpus.empty()) check_corpus_prompts(prompt_tokens, validation_every);
  check_generation_config(gen);
  const ChatTemplate chat = parse_chat_template(chat_template);

  const LoadedModel loaded = load_model_and_tokenizer(mo);
  const Tokenizer& tok = *loaded.tokenizer;
  std::vector<std::vector<int64_t>> prompts =
      corpus.empty() ? prompts_from_file(prompts_path, tok, chat)
                     : prompts_from_corpus(corpus, tok, prompt_tokens, max_prompts, validation_every);
  if (max_prompts > 0 && static_cast<int64_t>(prompts.size()) > max_prompts) prompts.resize(max_prompts);
  for (int32_t eos : loaded.model->config().eos_token_ids) gen.stop_tokens.push_back(eos);
  // llama2.c-style corpora separate stories with BOS: a BOS ends the continuation (what follows is a new story).
  if (tok.bos_id() >= 0) gen.stop_tokens.push_back(tok.bos_id());

  // Several ranks: each continues its share of the prompts, rank 0 writes them all (the same file as one process).
  const auto parallel = join_data_parallel(dist, loaded.model->options().device);
  const bool main_rank = !parallel || parallel->is_main();
  quiet = quiet || !main_rank;
  const bool terminal = ::isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  // Several ranks: progress counts rank 0's prompts (every world * batch prompts, it continues batch of them).
  int64_t total = static_cast<int64_t>(prompts.size());
  if (parallel) {
    const int64_t round = parallel->world_size() * batch;
    total = total / round * batch + std::min(batch, total % round);
  }
  auto progress = [&](int64_t done, int64_t generated) {
    if (quiet || (!terminal && done % 100 != 0 && done != total)) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "%sprompt %ld/%ld  %ld tokens  %.0f tokens/s  ETA %.0f s%s", terminal ? "\r" : "",
                 static_cast<long>(done), static_cast<long>(total), static_cast<long>(generated),
                 s > 0 ? static_cast<double>(generated) / s : 0.0,
                 s / static_cast<double>(done) * static_cast<double>(total - done), terminal && done != total ? "   " : "\n");
    std::fflush(stderr);
  };
  const auto sequences = generate_head_data(*loaded.model, prompts, gen, progress, batch, parallel.get());
  if (!main_rank) return 0;
  write_head_data(out, text_out ? HeadDataFormat::Text : HeadDataFormat::Tokens, sequences, tok);
  int64_t generated = 0;
  for (const auto& s : sequences) generated += static_cast<int64_t>(s.continuation.size());
  std::fprintf(stderr, "%ld prompts, %ld generated tokens written to %s (%s)\n", static_cast<long>(sequences.size()),
               static_cast<long>(generated), out.c_str(), text_out ? "text" : "tokens");
  return 0;
}

}  // namespace draftlab::cli
