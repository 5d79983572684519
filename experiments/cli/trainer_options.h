// The flags every training command shares (train-lm, train-head): the run's (TrainingRunOptions: output, batch,
// context, seed, validation, resume, keep-best, save dtype) and the optimiser's and schedule's (TrainerOptions), and
// the summary a run ends with. Defaults are whatever the options hold when these are called, so each command sets
// its own first.
#pragma once

#include <boost/program_options.hpp>

#include <cstdio>
#include <string>

#include "core/base/error.h"
#include "core/distributed/data_parallel.h"
#include "core/model/compute_options.h"
#include "core/training/training_run.h"

namespace draftlab::cli {

inline void add_trainer_options(boost::program_options::options_description& desc, TrainerOptions& t) {
  namespace po = boost::program_options;
  desc.add_options()
      ("steps", po::value(&t.steps)->default_value(t.steps), "optimisation steps")
      ("lr", po::value(&t.lr)->default_value(t.lr), "peak learning rate")
      ("min-lr-ratio", po::value(&t.min_lr_ratio)->default_value(t.min_lr_ratio), "final lr as a fraction of --lr")
      ("warmup", po::value(&t.warmup)->default_value(t.warmup), "linear warm-up steps")
      ("weight-decay", po::value(&t.weight_decay)->default_value(t.weight_decay), "AdamW decay on matrices")
      ("beta1", po::value(&t.beta1)->default_value(t.beta1), "AdamW beta1")
      ("beta2", po::value(&t.beta2)->default_value(t.beta2), "AdamW beta2")
      ("grad-clip", po::value(&t.grad_clip)->default_value(t.grad_clip), "max global gradient norm (0 = off)")
      ("eval-every", po::value(&t.eval_every)->default_value(t.eval_every), "validation every K steps (0 = never)")
      ("save-every", po::value(&t.save_every)->default_value(t.save_every),
       "checkpoint every N steps (0 = only at the end)")
      ("log-every", po::value(&t.log_every)->default_value(t.log_every),
       "progress line every N steps when stderr is not a terminal")
      ("quiet,q", po::bool_switch(&t.quiet), "no progress output")
      ("stop-at", po::value(&t.stop_at)->default_value(t.stop_at),
       "end this invocation after step N with a checkpoint; continue later with --resume (0 = run to --steps)")
      ("patience", po::value(&t.patience)->default_value(t.patience),
       "early stopping: end after N validations in a row without a new best validation loss (0 = run to --steps)")
      ("accumulate", po::value(&t.accumulate)->default_value(t.accumulate),
       "gradient accumulation: each rank's rows of a step in N micro-batches, one forward and backward at a time "
       "(the same step as one pass, less activation memory)");
}

// --save-dtype's text, parsed into TrainingRunOptions::save_dtype by apply_training_run_flags.
struct TrainingRunFlags {
  std::string save_dtype = "float32";
  int validation_every = 50;  // every N-th sequence of the data goes to the validation split
};

// --out, --batch, --context, --seed, --eval-windows, --validation-every, --resume, --keep-best, --save-dtype, and
// the optimiser's flags (add_trainer_options). `rows` and `context` say what a row and the context are for this
// command.
inline void add_training_run_options(boost::program_options::options_description& desc, TrainingRunOptions& o,
                                     TrainingRunFlags& f, const char* rows, const char* context) {
  namespace po = boost::program_options;
  desc.add_options()
      ("out", po::value(&o.out_dir)->required(), "output folder: config.json, model.safetensors, training state, log")
      ("batch", po::value(&o.batch)->default_value(o.batch), rows)
      ("context", po::value(&o.context)->default_value(o.context), context)
      ("seed", po::value(&o.seed)->default_value(o.seed), "seed of the initial weights, every batch and its noise")
      ("eval-windows", po::value(&o.eval_windows)->default_value(o.eval_windows), "validation rows per pass")
      ("validation-every", po::value(&f.validation_every)->default_value(f.validation_every),
       "every N-th sequence goes to the validation split")
      ("resume", po::bool_switch(&o.resume), "continue from --out/training_state.safetensors")
      ("keep-best", po::bool_switch(&o.keep_best),
       "the saved model is the checkpoint of lowest validation loss, not the last (with --patience: early stopping)")
      ("save-dtype", po::value(&f.save_dtype)->default_value(f.save_dtype),
       "dtype of the saved model: float32, float16 or bfloat16 (the resumable training state stays float32)");
  add_trainer_options(desc, o.trainer);
}

// Parses --save-dtype into o and checks the run's options (before anything loads). Throws Error naming the flag.
inline void apply_training_run_flags(const TrainingRunFlags& f, TrainingRunOptions& o) {
  try {
    o.save_dtype = parse_compute_dtype(f.save_dtype);
  } catch (const Error&) {  // its message would name --dtype
    throw Error("--save-dtype: expected float32, float16 or bfloat16, got '" + f.save_dtype + "'");
  }
  check(f.validation_every >= 2, "--validation-every: expected 2 or more, got " + std::to_string(f.validation_every));
  check_training_run_options(o);
}

// The summary every run ends with (rank 0): traffic, parameters, speed, the last validation's loss and metrics, the
// best validation.
inline void report_training_run(const TrainingRunResult& r, const TrainingRunOptions& o) {
  if (o.parallel && !o.parallel->is_main()) return;
  if (o.parallel) std::fprintf(stderr, "%s\n", o.parallel->traffic_line().c_str());
  std::fprintf(stderr, "%ld parameters; %.0f tokens/s; saved to %s\n", static_cast<long>(r.parameters),
               r.tokens_per_second, o.out_dir.c_str());
  if (!r.curves.eval_loss.empty()) {
    std::fprintf(stderr, "final validation loss %.4f", r.curves.eval_loss.back());
    for (const TrainingMetric& m : training_metrics()) {
      const auto* rows = r.curves.metric(m.name);
      if (rows == nullptr || rows->empty()) continue;
      std::fprintf(stderr, "; %s", m.name);
      for (double v : rows->back()) std::fprintf(stderr, " %.4f", v);
    }
    std::fprintf(stderr, "\n");
  }
  if (r.best.step >= 0)
    std::fprintf(stderr, "best validation loss %.4f at step %ld%s\n", r.best.loss, static_cast<long>(r.best.step),
                 o.keep_best ? " (saved as the model)" : "");
}

}  // namespace draftlab::cli
