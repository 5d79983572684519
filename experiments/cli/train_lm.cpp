// draftlab train-lm: pretrain a small Llama from scratch on a text corpus (stories separated by blank lines), or
// fine-tune one (--init), and write a Hugging Face folder that `draftlab generate --model DIR` runs. --parallel K
// trains PARD's parallel draft (strategies/pard); with --teacher, PARD-2's loss against the target it will serve.
// --resume continues a run exactly.
#include <ATen/Parallel.h>
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>

#include "core/base/error.h"
#include "core/base/platform.h"
#include "core/model/llama_model.h"
#include "core/training/language_model_training.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/data_parallel_options.h"
#include "experiments/cli/model_loading.h"
#include "experiments/cli/trainer_options.h"
#include "strategies/pard/pard_training.h"
#include "strategies/strategy_options.h"

namespace po = boost::program_options;

namespace draftlab::cli {

int run_train_lm(int argc, char** argv) {
  keep_freed_memory_for_training();  // large activations reused each step, not mapped anew (platform.h)
  std::string corpus, tokenizer_path, dtype = "float32", device = "cpu", init_path, cod = "0.7,0.2", mask_token = "auto";
  std::string teacher_path, loss_weights = "0.1,1.0";
  bool no_cat = false;
  int64_t parallel_k = 1;
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
      ("device", po::value(&device)->default_value(device), "cpu, cuda, cuda:N")
      ("init", po::value(&init_path),
       "fine-tune this model (a Hugging Face folder or llama2.c .bin) instead of training from random weights; its "
       "shape replaces --dim ... --router-aux-loss-coef, its context the default --context")
      ("parallel", po::value(&parallel_k)->default_value(parallel_k),
       "PARD: train to draft K tokens in one forward by filling K - 1 appended mask tokens (1 = an ordinary LM; "
       "strategy pard)")
      ("cod", po::value(&cod)->default_value(cod),
       "with --parallel: conditional drop-off r,r_min (mask copy i keeps max(r^i, r_min) of the positions; 1,1 = all)")
      ("mask-token", po::value(&mask_token)->default_value(mask_token),
       "with --parallel: the mask id, or auto = the highest id absent from the corpus (recorded as config.json "
       "pard_token)")
      ("teacher", po::value(&teacher_path),
       "with --parallel: PARD-2's loss against this target (the model the draft will serve; same vocabulary): "
       "cross-entropy plus the KL divergence from the target's distribution, rows weighted by the target's "
       "probability of the tokens before them (CAT)")
      ("loss-weights", po::value(&loss_weights)->default_value(loss_weights),
       "with --teacher: ce,kd, the weights of the cross-entropy and of the KL divergence (PARD-2's 0.1,1.0)")
      ("no-cat", po::bool_switch(&no_cat), "with --teacher: every row weighs 1 (PARD-2 without its CAT weights)");

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
  if (!init_path.empty()) {
    for (const char* shape : {"dim", "layers", "heads", "kv-heads", "hidden", "experts", "experts-per-token",
                              "router-aux-loss-coef"})
      check(vm[shape].defaulted(), std::string("--") + shape + ": the model's shape comes from --init " + init_path);
    ComputeOptions reading;
    reading.cpu_path = CpuPath::Reference;
    c = LlamaModel::load(init_path, reading)->config();
    check(c.vocab_size == tokenizer->vocab_size(),
          "--tokenizer " + tokenizer_path + ": has " + std::to_string(tokenizer->vocab_size()) + " ids but --init " +
              init_path + " has vocab_size " + std::to_string(c.vocab_size));
    if (vm["context"].defaulted()) o.context = c.max_position_embeddings;  // the window it was trained with
    check(o.context <= c.max_position_embeddings, "--context: expected at most --init's max_position_embeddings (" +
                                                      std::to_string(c.max_position_embeddings) + "), got " +
                                                      std::to_string(o.context));
    o.init_from = init_path;
  } else {
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
  }
  c.validate("train-lm options");
  o.tokenizer_path = tokenizer_path;
  // --parallel's options, checked before the corpus loads (the mask id against the vocabulary once it is known).
  ParallelDraftOptions pard;
  pard.k = parallel_k;
  if (parallel_k != 1) {
    check(parse_option_number_pair(cod, &pard.cod_ratio, &pard.cod_min_ratio),
          "--cod: expected r,r_min (e.g. 0.7,0.2), got \"" + cod + "\"");
    int64_t id = 0;
    check(mask_token == "auto" || (parse_option_int(mask_token, &id) && id >= 0 && id < c.vocab_size),
          "--mask-token: expected auto or an id in [0, " + std::to_string(c.vocab_size) + "), got \"" + mask_token +
              "\"");
    pard.mask_token = static_cast<int32_t>(id);  // auto: chosen once the corpus is read
    check_parallel_draft_options(pard, c.vocab_size);
  }
  // --teacher (PARD-2's loss), loaded before the corpus: a wrong path or vocabulary fails at once.
  std::shared_ptr<ParallelDraftTeacher> teacher;
  if (!teacher_path.empty()) {
    check(parallel_k != 1, "--teacher: only with --parallel K (PARD-2's loss for a parallel draft)");
    teacher = std::make_shared<ParallelDraftTeacher>();
    teacher->path = teacher_path;
    teacher->cat = !no_cat;
    check(parse_option_number_pair(loss_weights, &teacher->ce_weight, &teacher->kd_weight),
          "--loss-weights: expected ce,kd (e.g. 0.1,1.0), got \"" + loss_weights + "\"");
    ComputeOptions reading = o.compute;
    reading.cpu_path = CpuPath::Reference;  // training_forward reads its float32 tensors
    check_parallel_draft_teacher(*teacher, 0);  // the weights, before the model loads
    teacher->target = LlamaModel::load(teacher_path, reading);
    check_parallel_draft_teacher(*teacher, c.vocab_size);
  } else {
    check(vm["loss-weights"].defaulted() && !no_cat, "--loss-weights and --no-cat: only with --teacher");
  }
  check_lm_training_options(o);  // before the corpus loads

  const TextDataset data(corpus, *tokenizer, run_flags.validation_every);
  if (parallel_k != 1) {
    if (mask_token == "auto") pard.mask_token = unused_token(data.token_counts(c.vocab_size));
    c.pard_token = pard.mask_token;
    o.objective = std::make_shared<ParallelDraftObjective>(pard, teacher);
  }
  o.parallel = join_data_parallel(dist, o.compute.device);
  const bool main_rank = !o.parallel || o.parallel->is_main();  // the others train in silence
  if (main_rank)
    std::fprintf(stderr, "corpus %s: %ld stories, %ld training and %ld validation tokens\n", corpus.c_str(),
               static_cast<long>(data.stories()), static_cast<long>(data.train_tokens()),
               static_cast<long>(data.validation_tokens()));
  if (main_rank && o.objective) std::fprintf(stderr, "objective: %s\n", o.objective->describe().c_str());
  report_training_run(train_language_model(o, data), o);
  return 0;
}

}  // namespace draftlab::cli
