// draftlab generate: decode a prompt with the plain autoregressive loop, streaming text as it comes.
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>

#include "core/base/error.h"
#include "core/decoding/vanilla_decoder.h"
#include "core/text/text_stream.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/model_loading.h"

namespace po = boost::program_options;

namespace draftlab::cli {

int run_generate(int argc, char** argv) {
  ModelOptions model_opts;
  std::string prompt;
  GenerationConfig gen;
  bool print_ids = false;

  po::options_description desc("draftlab generate: decode a prompt and report tokens/s\n\noptions");
  add_model_options(desc, model_opts);
  desc.add_options()
      ("help,h", "show this help")
      ("prompt,p", po::value(&prompt)->required(), "prompt text (\"\" starts from BOS alone, as llama2.c does)")
      ("max-new-tokens,n", po::value(&gen.max_new_tokens)->default_value(128), "tokens to generate at most")
      ("temperature,t", po::value(&gen.sampling.temperature)->default_value(0.0), "0 = greedy")
      ("top-k", po::value(&gen.sampling.top_k)->default_value(0), "keep the k most probable tokens (0 = off)")
      ("top-p", po::value(&gen.sampling.top_p)->default_value(1.0), "nucleus sampling mass (1 = off)")
      ("seed", po::value(&gen.seed)->default_value(0), "random seed (runs with the same seed repeat exactly)")
      ("context", po::value(&gen.context_limit)->default_value(0), "context limit (0 = the model's)")
      ("print-ids", po::bool_switch(&print_ids), "print prompt and generated token ids after the text");

  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  try {
    po::notify(vm);
  } catch (const po::error& e) {
    throw Error(std::string(e.what()) + " (see draftlab generate --help)");
  }

  LoadedModel loaded = load_model_and_tokenizer(model_opts);
  const Tokenizer& tok = *loaded.tokenizer;
  std::vector<int64_t> prompt_ids;
  for (int32_t id : tok.encode(prompt, /*add_bos=*/true)) prompt_ids.push_back(id);
  if (prompt_ids.empty())
    throw Error("--prompt: empty prompt and the tokenizer has no BOS token to start from");
  for (int32_t eos : loaded.model->config().eos_token_ids) gen.stop_tokens.push_back(eos);

  TextStream stream(tok);
  for (int64_t id : prompt_ids) std::cout << stream.push(static_cast<int32_t>(id));
  std::cout.flush();
  auto result = generate_vanilla(*loaded.model, prompt_ids, gen, [&](int64_t id) {
    std::cout << stream.push(static_cast<int32_t>(id));
    std::cout.flush();
  });
  std::cout << stream.finish() << "\n";

  if (print_ids) {
    std::cout << "prompt_ids";
    for (int64_t id : prompt_ids) std::cout << " " << id;
    std::cout << "\ngenerated_ids";
    for (int64_t id : result.tokens) std::cout << " " << id;
    std::cout << "\n";
  }
  std::fprintf(stderr, "[%zu prompt tokens, %zu generated, stop: %s] prefill %.1f ms, decode %.3f s: %.1f tokens/s\n",
               prompt_ids.size(), result.tokens.size(), result.stop_reason.c_str(), result.prefill_seconds * 1e3,
               result.decode_seconds, result.tokens_per_second());
  return 0;
}

}  // namespace draftlab::cli
