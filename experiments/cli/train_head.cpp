// draftlab train-head: train an EAGLE draft head (EAGLE paper section 3.2) for a frozen target on a text corpus
// (stories separated by blank lines) and write a head folder that `--strategy eagle2:head=DIR` runs.
// --resume continues a run exactly.
#include <boost/program_options.hpp>

#include <cstdio>

#include "core/base/error.h"
#include "core/training/eagle_head_training.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/model_loading.h"
#include "experiments/cli/trainer_options.h"

namespace po = boost::program_options;

namespace draftlab::cli {

int run_train_head(int argc, char** argv) {
  ModelOptions mo;
  std::string corpus, save_dtype = "float32";
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
      ("corpus", po::value(&corpus)->required(), "text file of stories separated by blank lines")
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
      ("save-dtype", po::value(&save_dtype)->default_value(save_dtype),
       "dtype of model.safetensors: float32, float16 or bfloat16");

  add_trainer_options(desc, t);

  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "train-head", vm)) return 0;
  o.save_dtype = parse_compute_dtype(save_dtype);
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "draftlab ") + std::string(argv[i]);

  const LoadedModel loaded = load_model_and_tokenizer(mo);
  const TextDataset data(corpus, *loaded.tokenizer, validation_every);
  std::fprintf(stderr, "corpus %s: %ld stories, %ld training and %ld validation tokens\n", corpus.c_str(),
               static_cast<long>(data.stories()), static_cast<long>(data.train_tokens()),
               static_cast<long>(data.validation_tokens()));
  const HeadTrainingResult r = train_eagle_head(*loaded.model, o, data);
  std::fprintf(stderr, "%ld head parameters; %.0f tokens/s; saved to %s\n", static_cast<long>(r.parameters),
               r.tokens_per_second, o.out_dir.c_str());
  if (!r.curves.eval_loss.empty())
    std::fprintf(stderr, "final validation loss %.4f, top-1 accuracy %.4f\n", r.curves.eval_loss.back(),
                 r.eval_accuracy.empty() ? 0.0 : r.eval_accuracy.back());
  return 0;
}

}  // namespace draftlab::cli
