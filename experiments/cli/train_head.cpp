// draftlab train-head: train an EAGLE draft head (EAGLE paper section 3.2) for a frozen target on a text corpus
// (stories separated by blank lines) and write a head folder that `--strategy eagle2:head=DIR` runs.
// --resume continues a run exactly.
#include <boost/program_options.hpp>

#include <cstdio>

#include "core/base/error.h"
#include "core/training/eagle_head_training.h"
#include "core/training/head_data.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/model_loading.h"
#include "experiments/cli/trainer_options.h"

namespace po = boost::program_options;

namespace draftlab::cli {

int run_train_head(int argc, char** argv) {
  ModelOptions mo;
  std::string corpus, save_dtype = "float32";
  std::string data_path, data_format = "auto", chat_template = "plain", cache_dtype = "float32";
  int validation_every = 50;
  HeadTrainingOptions o;
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

  po::options_description desc("draftlab train-head: train an EAGLE draft head for a target on a text corpus\n\noptions");
  desc.add_options()("help,h", "show this help");
  add_model_options(desc, mo);
  desc.add_options()
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
      ("context", po::value(&o.context)->default_value(o.context),
       "head positions per window (target windows are one token longer)")
      ("batch", po::value(&o.batch)->default_value(o.batch), "windows per step")
      ("cls-weight", po::value(&o.cls_weight)->default_value(o.cls_weight), "weight of the soft cross-entropy")
      ("seed", po::value(&o.seed)->default_value(o.seed), "seed of the initial head, every batch and its noise")
      ("eval-windows", po::value(&o.eval_windows)->default_value(o.eval_windows), "validation windows per pass")
      ("validation-every", po::value(&validation_every)->default_value(validation_every),
       "every N-th story goes to the validation split")
      ("resume", po::bool_switch(&o.resume), "continue from --out/training_state.safetensors")
      ("input", po::value(&o.input)->default_value(o.input),
       "the head's input (EAGLE Figure 8): feature_shifted_token (EAGLE), feature_unshifted_token, feature_only, "
       "token_only")
      ("draft-vocab", po::value(&o.draft_vocab)->default_value(o.draft_vocab),
       "K > 0: draft over the K most frequent training tokens only (a cheaper LM head); 0 = the full vocabulary")
      ("save-dtype", po::value(&save_dtype)->default_value(save_dtype),
       "dtype of model.safetensors: float32, float16 or bfloat16");

  add_trainer_options(desc, t);

  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "train-head", vm)) return 0;
  o.save_dtype = parse_compute_dtype(save_dtype);
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "draftlab ") + std::string(argv[i]);

  check(corpus.empty() != data_path.empty(), "train-head: expected exactly one of --corpus and --data");
  const LoadedModel loaded = load_model_and_tokenizer(mo);
  const std::string source = corpus.empty() ? data_path : corpus;
  const HeadDataFormat format = corpus.empty() ? parse_head_data_format(data_format, data_path) : HeadDataFormat::Text;
  const TextDataset data = load_head_data(source, format, *loaded.tokenizer, loaded.model->config().vocab_size,
                                          parse_chat_template(chat_template), validation_every);
  if (!o.feature_cache.path.empty()) {
    check(cache_dtype == "float32" || cache_dtype == "float16",
          "--feature-cache-dtype: expected float32 or float16, got " + cache_dtype);
    o.feature_cache.dtype = cache_dtype == "float16" ? at::kHalf : at::kFloat;
    o.feature_cache.quiet = t.quiet;
    o.feature_cache.model_path = mo.model_path;
    o.feature_cache.tokenizer = tokenizer_checksum(*loaded.tokenizer);
    o.feature_cache.data_source = source + " (" + head_data_format_name(format) + ")";
  }
  std::fprintf(stderr, "%s %s: %ld sequences, %ld training and %ld validation tokens%s\n", head_data_format_name(format),
               source.c_str(),
               static_cast<long>(data.stories()), static_cast<long>(data.train_tokens()),
               static_cast<long>(data.validation_tokens()), data.has_loss_mask() ? ", with a loss mask" : "");
  const HeadTrainingResult r = train_eagle_head(*loaded.model, o, data);
  std::fprintf(stderr, "%ld head parameters; %.0f tokens/s; saved to %s\n", static_cast<long>(r.parameters),
               r.tokens_per_second, o.out_dir.c_str());
  if (!r.curves.eval_loss.empty())
    std::fprintf(stderr, "final validation loss %.4f, top-1 accuracy %.4f\n", r.curves.eval_loss.back(),
                 r.eval_accuracy.empty() ? 0.0 : r.eval_accuracy.back());
  if (!r.eval_alpha.empty()) {
    std::fprintf(stderr, "final validation chain acceptance:");
    for (size_t n = 0; n < r.eval_alpha.back().size(); ++n) std::fprintf(stderr, " %zu-alpha %.3f", n, r.eval_alpha.back()[n]);
    std::fprintf(stderr, "\n");
  }
  return 0;
}

}  // namespace draftlab::cli
