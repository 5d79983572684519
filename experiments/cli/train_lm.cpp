// draftlab train-lm: pretrain a small Llama from scratch on a text corpus (stories separated by blank lines) and
// write a Hugging Face folder that `draftlab generate --model DIR` runs. --resume continues a run exactly.
#include <ATen/Parallel.h>
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>

#include "core/base/error.h"
#include "core/training/language_model_training.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/data_parallel_options.h"
#include "experiments/cli/model_loading.h"
#include "experiments/cli/trainer_options.h"

namespace po = boost::program_options;

namespace draftlab::cli {

int run_train_lm(int argc, char** argv) {
  std::string corpus, tokenizer_path, dtype = "float32", device = "cpu";
  int64_t dim = 64, layers = 4, heads = 4, kv_heads = 0, hidden = 0, experts = 0, experts_per_token = 2;
  double router_aux_loss_coef = 0.01;
  int threads = 0;
  DataParallelFlags dist;
  LmTrainingOptions o;
  o.context = 128;
  o.batch = 16;
  TrainingRunFlags run_flags;

  po::options_description desc("draftlab train-lm: pretrain a Llama from scratch on a text corpus\n\noptions");
  desc.add_options()
      ("help,h", "show this help")
      ("corpus", po::value(&corpus)->required(), "text file of stories separated by blank lines")
      ("tokenizer", po::value(&tokenizer_path)->required(),
       "tokenizer (tokenizer.json, llama2.c .bin, ...); copied into --out")
      ("dim", po::value(&dim)->default_value(dim), "hidden size")
      ("layers", po::value(&layers)->default_value(layers), "decoder layers")
      ("heads", po::value(&heads)->default_value(heads), "attention heads")
      ("kv-heads", po::value(&kv_heads)->default_value(kv_heads), "key/value heads (0 = --heads)")
      ("hidden", po::value(&hidden)->default_value(hidden),
       "MLP intermediate size, per expert with --experts (0 = llama2.c's rule from --dim)")
      ("experts", po::value(&experts)->default_value(experts),
       "mixture of experts (Mixtral): experts per layer (0 = a dense MLP)")
      ("experts-per-token", po::value(&experts_per_token)->default_value(experts_per_token),
       "experts the router picks per token")
      ("router-aux-loss-coef", po::value(&router_aux_loss_coef)->default_value(router_aux_loss_coef),
       "weight of the load-balancing loss (Mixtral's router_aux_loss_coef)")
      ("threads", po::value(&threads)->default_value(threads), "intra-op threads (0 = $OMP_NUM_THREADS or all)")
      ("dtype", po::value(&dtype)->default_value(dtype), "compute dtype: float32 or bfloat16")
      ("device", po::value(&device)->default_value(device), "cpu, cuda, cuda:N");

  add_training_run_options(desc, o, run_flags, "windows per step", "training window and max_position_embeddings");
  add_data_parallel_options(desc, dist);

  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "train-lm", vm)) return 0;
  apply_training_run_flags(run_flags, o);
  check(threads >= 0, "--threads: expected 0 (auto) or a positive number, got " + std::to_string(threads));
  if (threads > 0) at::set_num_threads(threads);
  o.compute.dtype = parse_compute_dtype(dtype);
  o.compute.device = parse_compute_device(device);
  check_supported(o.compute);
  o.command_line = recorded_command_line(argc, argv, vm);

  const auto tokenizer = load_tokenizer(tokenizer_path);
  ModelConfig& c = o.config;
  c.hidden_size = dim;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads > 0 ? kv_heads : heads;
  check(heads > 0 && dim % heads == 0, "--heads: expected a divisor of --dim (" + std::to_string(dim) + "), got " +
                                           std::to_string(heads));
  c.head_dim = dim / heads;
  // llama2.c's rule: 2/3 of 4 dim, rounded up to a multiple of 32.
  c.intermediate_size = hidden > 0 ? hidden : ((8 * dim / 3 + 31) / 32) * 32;
  c.vocab_size = tokenizer->vocab_size();
  check(experts >= 0, "--experts: expected 0 (dense) or a positive number, got " + std::to_string(experts));
  if (experts > 0) {
    c.num_local_experts = experts;
    c.num_experts_per_tok = experts_per_token;
    c.router_aux_loss_coef = router_aux_loss_coef;
  }
  c.max_position_embeddings = o.context;
  c.tie_word_embeddings = true;  // small models: the head is most of the parameters otherwise
  c.bos_token_id = tokenizer->bos_id() >= 0 ? tokenizer->bos_id() : 1;
  // Stories start with BOS and have no EOS: generation should stop at the next story as well as at EOS.
  c.eos_token_ids.clear();
  if (tokenizer->eos_id() >= 0) c.eos_token_ids.push_back(tokenizer->eos_id());
  if (tokenizer->bos_id() >= 0 && tokenizer->bos_id() != tokenizer->eos_id()) c.eos_token_ids.push_back(tokenizer->bos_id());
  c.validate("train-lm options");
  o.tokenizer_path = tokenizer_path;
  check_lm_training_options(o);  // before the corpus loads

  const TextDataset data(corpus, *tokenizer, run_flags.validation_every);
  o.parallel = join_data_parallel(dist, o.compute.device);
  const bool main_rank = !o.parallel || o.parallel->is_main();  // the others train in silence
  if (main_rank)
    std::fprintf(stderr, "corpus %s: %ld stories, %ld training and %ld validation tokens\n", corpus.c_str(),
               static_cast<long>(data.stories()), static_cast<long>(data.train_tokens()),
               static_cast<long>(data.validation_tokens()));
  report_training_run(train_language_model(o, data), o);
  return 0;
}

}  // namespace draftlab::cli
