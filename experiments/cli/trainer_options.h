// The optimiser and schedule flags every training command shares (train-lm, train-head), read into
// TrainerOptions. Defaults are whatever `t` holds when this is called, so each command sets its own first.
#pragma once

#include <boost/program_options.hpp>

#include "core/training/trainer.h"

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

}  // namespace draftlab::cli
