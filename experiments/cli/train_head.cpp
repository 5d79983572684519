// draftlab train-head: train draft heads for a frozen target on a text corpus (stories separated by blank lines),
// chat data or target-generated token lines, and write a head folder that the strategies of that kind run:
//   --kind eagle    an EAGLE head (EAGLE paper section 3.2; core/training/eagle_head_training.h), for
//                   --strategy eagle2:head=DIR and the other EAGLE strategies
//   --kind medusa   Medusa-1 heads (core/training/medusa_training.h, parallel_head_training.h), for -s medusa:head=DIR
//   --kind hydra    Hydra heads (core/training/hydra_training.h, the same trainer), for -s hydra:head=DIR
//   --kind eagle3   an EAGLE-3 head trained with training-time test (core/training/eagle3_training.h), for
//                   -s eagle3:head=DIR
// Every kind trains through one pipeline (core/training/head_training.h); --resume continues a run exactly.
#include <boost/program_options.hpp>

#include <cstdio>
#include <sstream>

#include "core/base/error.h"
#include "core/model/head_family.h"
#include "core/training/eagle3_training.h"
#include "core/training/eagle_head_training.h"
#include "core/training/head_data.h"
#include "core/training/hydra_training.h"
#include "core/training/medusa_training.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/data_parallel_options.h"
#include "experiments/cli/model_loading.h"
#include "experiments/cli/trainer_options.h"
#include "strategies/strategy_options.h"

namespace po = boost::program_options;

namespace draftlab::cli {

namespace {

// Refuses an option of another kind given on the command line (defaults do not count).
void check_kind_options(const po::variables_map& vm, const po::options_description& group, const std::string& kind,
                        const std::string& kind_given) {
  for (const auto& o : group.options())
    if (vm.count(o->long_name()) && !vm[o->long_name()].defaulted())
      throw Error("--" + o->long_name() + ": applies to --kind " + kind + ", not --kind " + kind_given);
}

// One summary for every family: parameters, speed, and the last validation pass's loss and metrics.
void report(const HeadTrainingResult& r, const std::string& out_dir, const DataParallel* parallel) {
  if (parallel && !parallel->is_main()) return;
  if (parallel) std::fprintf(stderr, "%s\n", parallel->traffic_line().c_str());
  std::fprintf(stderr, "%ld head parameters; %.0f tokens/s; saved to %s\n", static_cast<long>(r.parameters),
               r.tokens_per_second, out_dir.c_str());
  if (r.curves.eval_loss.empty()) return;
  std::fprintf(stderr, "final validation loss %.4f", r.curves.eval_loss.back());
  for (const TrainingMetric& m : training_metrics()) {
    const auto* rows = r.curves.metric(m.name);
    if (rows == nullptr || rows->empty()) continue;
    std::fprintf(stderr, "; %s", m.name);
    for (double v : rows->back()) std::fprintf(stderr, " %.4f", v);
  }
  std::fprintf(stderr, "\n");
}

}  // namespace

int run_train_head(int argc, char** argv) {
  ModelOptions mo;
  std::string corpus, save_dtype = "float32", kind_name = "eagle";
  std::string data_path, data_format = "auto", chat_template = "plain", cache_dtype = "float32", samples = "whole";
  int validation_every = 50;
  double dist_timeout = 300;
  double data_fraction = 1.0;
  EagleHeadTrainingOptions o;  // the EAGLE options, and the ones every kind shares
  o.context = 128;
  o.batch = 16;
  TrainerOptions& t = o.trainer;
  t.steps = 2000;
  t.lr = 3e-4;
  t.warmup = 100;
  t.weight_decay = 0.0;
  t.beta1 = 0.9;
  t.beta2 = 0.95;
  t.grad_clip = 0.5;
  MedusaConfig medusa;
  HydraConfig hydra;
  std::string medusa_lm_head = "shared", hydra_lm_head = "shared";
  ParallelHeadLossOptions loss;  // Medusa and Hydra
  bool teacher = false;

  po::options_description desc("draftlab train-head: train draft heads for a target on a text corpus\n\noptions");
  desc.add_options()("help,h", "show this help");
  add_model_options(desc, mo);
  desc.add_options()
      ("kind", po::value(&kind_name)->default_value(kind_name), "eagle (an EAGLE head), eagle3 (an EAGLE-3 head, trained with training-time test), medusa (Medusa-1 heads) or hydra (Hydra heads)")
      ("corpus", po::value(&corpus), "text file of stories separated by blank lines (or --data)")
      ("data", po::value(&data_path),
       "training data instead of --corpus: text stories, chat JSONL (loss on assistant turns) or token lines from "
       "gen-head-data (loss on the continuations); see core/training/head_data.h")
      ("data-format", po::value(&data_format)->default_value(data_format),
       "auto (*.jsonl chat, *.tokens tokens, else text), text, chat or tokens")
      ("chat-template", po::value(&chat_template)->default_value(chat_template),
       "template rendering chat data: plain, vicuna, llama2-chat, llama3-instruct")
      ("feature-cache", po::value(&o.feature_cache.path),
       "HDF5 file of the target's features of the training windows: built on first use, then read instead of "
       "running the target (refused if model, tokenizer, data, context, batch or seed differ)")
      ("cache-steps", po::value(&o.feature_cache.steps)->default_value(o.feature_cache.steps),
       "when building the cache: the steps whose windows it holds (0: --steps); later steps draw from it at random")
      ("feature-cache-dtype", po::value(&cache_dtype)->default_value(cache_dtype),
       "when building the cache: float32 (replays exactly) or float16 (half the size)")
      ("out", po::value(&o.out_dir)->required(), "output folder: config.json, model.safetensors, training state, log")
      ("samples", po::value(&samples)->default_value(samples),
       "whole: each row one sequence from its start (cut at context + 1 tokens, padded), so the target's features "
       "see its whole left context as at inference (the official trainers'); windows: random windows of the "
       "concatenated data, features of the window alone (draftlab before 2026-11-27)")
      ("context", po::value(&o.context)->default_value(o.context),
       "positions per row (target rows are one token longer)")
      ("batch", po::value(&o.batch)->default_value(o.batch), "rows per step")
      ("seed", po::value(&o.seed)->default_value(o.seed), "seed of the initial heads, every batch and its noise")
      ("eval-windows", po::value(&o.eval_windows)->default_value(o.eval_windows), "validation rows per pass")
      ("validation-every", po::value(&validation_every)->default_value(validation_every),
       "every N-th story goes to the validation split")
      ("data-fraction", po::value(&data_fraction)->default_value(data_fraction),
       "train on the first F of the training split's tokens (0 < F <= 1; the validation split stays whole): data "
       "scaling, EAGLE-3 Figure 1")
      ("resume", po::bool_switch(&o.resume), "continue from --out/training_state.safetensors")
      ("save-dtype", po::value(&save_dtype)->default_value(save_dtype),
       "dtype of model.safetensors: float32, float16 or bfloat16");
  po::options_description eagle("--kind eagle");
  eagle.add_options()
      ("input", po::value(&o.input)->default_value(o.input),
       "the head's input (EAGLE Figure 8): feature_shifted_token (EAGLE), feature_unshifted_token, feature_only, "
       "token_only")
      ("cls-weight", po::value(&o.cls_weight)->default_value(o.cls_weight, "0.1"), "weight of the soft cross-entropy");
  po::options_description recipe_desc("--kind eagle, medusa and hydra");
  recipe_desc.add_options()
      ("recipe", po::value(&o.recipe)->default_value(o.recipe),
       "paper (the documented defaults) or official, the official trainer's settings: eagle (train/main.py) noise "
       "scaled by 512 / context, row i iff mask[i], clip each gradient by value; medusa (Medusa-1) and hydra "
       "(Hydra++) unweighted head sum, AdamW (0.9, 0.999), their lr, decay, warm-up and clipping, hydra the teacher "
       "loss (docs/fidelity.md); optimiser flags given explicitly override it");
  po::options_description draft_vocab_desc("--kind eagle and --kind eagle3");
  draft_vocab_desc.add_options()
      ("draft-vocab", po::value(&o.draft_vocab)->default_value(o.draft_vocab),
       "K > 0: draft over the K most frequent training tokens only (a cheaper LM head; EAGLE-3: its own LM head of "
       "K rows, the tokens predicted under the loss mask); 0 = the full vocabulary");
  Eagle3TrainingOptions e3;
  std::string feature_layers;
  po::options_description eagle3_desc("--kind eagle3");
  eagle3_desc.add_options()
      ("ttt-steps", po::value(&e3.steps)->default_value(e3.steps),
       "training-time test: unrolled steps K, each feeding the head's own output back (the paper's 7)")
      ("ttt-decay", po::value(&e3.decay)->default_value(e3.decay, "0.8"), "step k's loss weighs decay^k")
      ("feature-layers", po::value(&feature_layers),
       "the three target layers whose inputs the head reads, comma-separated (0-based layer indices, L = the last "
       "layer's output; default: the official 2, L/2, L-3), or top: L three times (EAGLE-3 Table 2's TTT without "
       "fusion)");
  po::options_description parallel_desc("--kind medusa and --kind hydra");
  parallel_desc.add_options()
      ("decay", po::value(&loss.decay)->default_value(loss.decay, "0.8"),
       "head k's loss weight is decay^(k+1) (the Medusa paper's 0.8^k for heads 1..K); 1 = unweighted sum")
      ("teacher", po::bool_switch(&teacher),
       "learn the target's distribution of each label (Hydra++'s teacher loss) instead of the data's token");
  po::options_description medusa_desc("--kind medusa");
  medusa_desc.add_options()
      ("medusa-heads", po::value(&medusa.num_heads)->default_value(medusa.num_heads),
       "heads (head k predicts the token k + 2 positions after the feature)")
      ("medusa-layers", po::value(&medusa.num_layers)->default_value(medusa.num_layers), "residual blocks per head")
      ("medusa-lm-head", po::value(&medusa_lm_head)->default_value(medusa_lm_head),
       "shared (the target's LM head: small folders) or own (a [vocab, d] copy per head, as the official heads)");
  po::options_description hydra_desc("--kind hydra");
  hydra_desc.add_options()
      ("hydra-heads", po::value(&hydra.num_heads)->default_value(hydra.num_heads),
       "heads (head k reads the feature and k + 1 tokens, and predicts the token k + 2 positions after the feature)")
      ("hydra-layers", po::value(&hydra.num_layers)->default_value(hydra.num_layers),
       "ResBlocks per head (the first one reads the tokens; Hydra++ uses 4)")
      ("hydra-lm-head", po::value(&hydra_lm_head)->default_value(hydra_lm_head),
       "shared (the target's LM head) or own (a [vocab, d] copy with bias per head, as the official heads)");
  desc.add(eagle).add(recipe_desc).add(draft_vocab_desc).add(eagle3_desc).add(parallel_desc).add(medusa_desc).add(hydra_desc);
  add_trainer_options(desc, t);
  add_data_parallel_options(desc, dist_timeout);

  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "train-head", vm)) return 0;
  const std::string kind = find_head_family(kind_name).name;
  if (kind != "eagle") check_kind_options(vm, eagle, "eagle", kind_name);
  if (kind == "eagle3") check_kind_options(vm, recipe_desc, "eagle, medusa or hydra", kind_name);
  if (kind != "eagle" && kind != "eagle3") check_kind_options(vm, draft_vocab_desc, "eagle or eagle3", kind_name);
  if (kind != "eagle3") check_kind_options(vm, eagle3_desc, "eagle3", kind_name);
  if (kind != "medusa" && kind != "hydra") check_kind_options(vm, parallel_desc, "medusa or hydra", kind_name);
  if (kind != "medusa") check_kind_options(vm, medusa_desc, "medusa", kind_name);
  if (kind != "hydra") check_kind_options(vm, hydra_desc, "hydra", kind_name);
  check(medusa_lm_head == "shared" || medusa_lm_head == "own",
        "--medusa-lm-head: expected shared or own, got '" + medusa_lm_head + "'");
  check(medusa.num_heads >= 1 && medusa.num_layers >= 0,
        "--medusa-heads / --medusa-layers: expected at least 1 head and 0 layers");
  medusa.own_lm_head = medusa_lm_head == "own";
  check(hydra_lm_head == "shared" || hydra_lm_head == "own",
        "--hydra-lm-head: expected shared or own, got '" + hydra_lm_head + "'");
  check(hydra.num_heads >= 1 && hydra.num_layers >= 1,
        "--hydra-heads / --hydra-layers: expected at least 1 head and 1 layer");
  hydra.own_lm_head = hydra_lm_head == "own";
  loss.target = teacher ? ParallelHeadTarget::TargetDistribution : ParallelHeadTarget::Tokens;
  check_recipe(o.recipe);
  if ((kind == "medusa" || kind == "hydra") && o.recipe == "official")  // flags given explicitly keep their values
    apply_official_parallel_recipe(kind, t, loss, [&](const std::string& flag) { return !vm[flag].defaulted(); });
  o.save_dtype = parse_compute_dtype(save_dtype);
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "draftlab ") + std::string(argv[i]);

  // --feature-layers' form now, its range (the target's layers) once the target is loaded.
  if (!feature_layers.empty() && feature_layers != "top") {
    std::stringstream list(feature_layers);
    for (std::string v; std::getline(list, v, ',');) {
      int64_t layer = 0;
      check(parse_option_int(v, &layer) && layer >= 1,
            "--feature-layers: expected three layer indices >= 1 or top, got '" + feature_layers + "'");
      e3.feature_layers.push_back(layer);
    }
    check(e3.feature_layers.size() == 3, "--feature-layers: expected three layers, got '" + feature_layers + "'");
  }
  check(corpus.empty() != data_path.empty(), "train-head: expected exactly one of --corpus and --data");
  check_training_fraction(data_fraction);
  const Sampling sampling = parse_sampling(samples);
  const LoadedModel loaded = load_model_and_tokenizer(mo);
  const std::string source = corpus.empty() ? data_path : corpus;
  const HeadDataFormat format = corpus.empty() ? parse_head_data_format(data_format, data_path) : HeadDataFormat::Text;
  TextDataset data = load_head_data(source, format, *loaded.tokenizer, loaded.model->config().vocab_size,
                                    parse_chat_template(chat_template), validation_every);
  data.keep_training_fraction(data_fraction);
  data.set_sampling(sampling);
  o.data_description = source + " (" + head_data_format_name(format) + ")";
  if (data_fraction < 1) {
    char fraction[32];
    std::snprintf(fraction, sizeof fraction, "%g", data_fraction);
    o.data_description += ", the first " + std::string(fraction) + " of its training split";
  }
  if (!o.feature_cache.path.empty()) {
    check(cache_dtype == "float32" || cache_dtype == "float16",
          "--feature-cache-dtype: expected float32 or float16, got " + cache_dtype);
    o.feature_cache.dtype = cache_dtype == "float16" ? at::kHalf : at::kFloat;
    o.feature_cache.quiet = t.quiet;
    o.feature_cache.model_path = mo.model_path;
    o.feature_cache.tokenizer = tokenizer_checksum(*loaded.tokenizer);
    o.feature_cache.data_source = source + " (" + head_data_format_name(format) + ")";
  }
  o.parallel = join_data_parallel(dist_timeout, loaded.model->options().device);
  const bool main_rank = !o.parallel || o.parallel->is_main();  // the others train in silence
  if (main_rank)
    std::fprintf(stderr, "%s %s: %ld sequences, %ld training and %ld validation tokens%s, sampled %s\n",
               head_data_format_name(format), source.c_str(), static_cast<long>(data.stories()),
               static_cast<long>(data.train_tokens()), static_cast<long>(data.validation_tokens()),
               data.has_loss_mask() ? ", with a loss mask" : "", sampling_name(sampling));
  if (const double padding = data.padding_share(o.context); main_rank && padding > 0.5)
    std::fprintf(stderr,
                 "note: with --samples whole, %.0f%% of each row is padding (the sequences are short for --context "
                 "%ld): a smaller --context with a larger --batch spends less compute per token, --samples windows "
                 "none\n",
                 100 * padding, static_cast<long>(o.context));
  ParallelHeadTrainingOptions parallel;
  static_cast<HeadTrainingOptions&>(parallel) = o;
  parallel.loss = loss;
  if (kind == "medusa") {
    MedusaTrainingModel heads(*loaded.model, o.seed, medusa);
    report(train_parallel_heads(*loaded.model, heads, parallel, data), o.out_dir, o.parallel.get());
  } else if (kind == "hydra") {
    HydraTrainingModel heads(*loaded.model, o.seed, hydra);
    report(train_parallel_heads(*loaded.model, heads, parallel, data), o.out_dir, o.parallel.get());
  } else if (kind == "eagle3") {
    static_cast<HeadTrainingOptions&>(e3) = o;
    e3.draft_vocab = o.draft_vocab;
    const int64_t L = loaded.model->config().num_hidden_layers;
    if (feature_layers == "top") e3.feature_layers = {L, L, L};
    for (int64_t layer : e3.feature_layers)
      check(layer <= L, "--feature-layers: expected three layer indices in 1.." + std::to_string(L) +
                            " (the target's layers) or top, got '" + feature_layers + "'");
    report(train_eagle3_head(*loaded.model, e3, data), o.out_dir, o.parallel.get());
  } else {
    report(train_eagle_head(*loaded.model, o, data), o.out_dir, o.parallel.get());
  }
  return 0;
}

}  // namespace draftlab::cli
