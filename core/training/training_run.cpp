#include "core/training/training_run.h"

#include <filesystem>

#include "core/base/error.h"
#include "core/distributed/data_parallel.h"
#include "core/training/batch_part.h"
#include "core/training/training_log.h"

namespace draftlab {

namespace {

// Every check of the run before the Trainer is made from it; the trainer's options with tokens per step filled in.
TrainerOptions checked_trainer_options(const TrainingRunOptions& o) {
  check_training_run_options(o);
  check_batch_parts(o.batch, o.parallel ? o.parallel->world_size() : 1, o.trainer.accumulate);
  TrainerOptions t = o.trainer;
  t.tokens_per_step = o.batch * o.context;
  return t;
}

int64_t count_parameters(const TrainingRun::Parameters& parameters) {
  int64_t n = 0;
  for (const auto& [name, p] : parameters) n += p.numel();
  return n;
}

std::string state_path(const TrainingRunOptions& o) { return o.out_dir + "/training_state.safetensors"; }

}  // namespace

void check_training_run_options(const TrainingRunOptions& o) {
  check(o.batch > 0, "--batch: expected a positive number, got " + std::to_string(o.batch));
  check(!o.out_dir.empty(), "--out: expected a directory");
  check(!o.keep_best || o.trainer.eval_every > 0, "--keep-best: needs validation (--eval-every > 0)");
  check_trainer_options(o.trainer);
}

TrainingRun::TrainingRun(const TrainingRunOptions& options, Parameters parameters,
                         std::map<std::string, std::string> identity, const IdentityDefault& identity_default)
    : options_(options),
      identity_(std::move(identity)),
      parameter_count_(count_parameters(parameters)),
      trainer_(std::move(parameters), checked_trainer_options(options), options.parallel) {
  if (!options_.parallel || options_.parallel->is_main())
    std::filesystem::create_directories(options_.out_dir);  // after every check
  if (options_.resume) resumed_ = trainer_.resume(state_path(options_), identity_, identity_default);
}

TrainingRunResult TrainingRun::run(const std::function<at::Tensor(int64_t, const BatchPart&)>& loss,
                                   const std::function<double()>& eval_loss, const std::function<void()>& save_model,
                                   const std::map<std::string, std::string>& log_attributes) {
  Trainer::Hooks hooks;
  hooks.loss = loss;
  hooks.eval_loss = eval_loss;
  hooks.save = [&](int64_t) {  // rank 0 alone (Trainer)
    if (!options_.keep_best) save_model();
    TrainingCurves log = trainer_.curves();
    log.attributes = identity_;
    for (const auto& [key, value] : log_attributes) log.attributes[key] = value;
    log.attributes["command_line"] = options_.command_line;
    log.attributes["date"] = utc_timestamp();
    const Trainer::BestEval best = trainer_.best_eval();
    if (best.step >= 0) {
      log.attributes["best_step"] = std::to_string(best.step);
      log.attributes["best_validation_loss"] = std::to_string(best.loss);
      log.attributes["model_safetensors"] = options_.keep_best ? "best validation checkpoint" : "last checkpoint";
    }
    write_training_log(options_.out_dir + "/training_log.h5", log);
    trainer_.save_state(state_path(options_), identity_);  // last: see the header
  };
  if (options_.keep_best) hooks.save_best = [&](int64_t) { save_model(); };
  trainer_.run(hooks);

  TrainingRunResult result;
  result.parameters = parameter_count_;
  result.tokens_per_second = trainer_.tokens_per_second();
  result.curves = trainer_.curves();
  result.best = trainer_.best_eval();
  return result;
}

}  // namespace draftlab
