// The only translation unit that includes torch/optim (the optimizer headers are heavy to compile).
#include "core/training/trainer.h"

#include <torch/optim.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/distributed/data_parallel.h"
#include "core/io/safetensors.h"
#include "core/model/checkpoint_tensor.h"
#include "core/training/progress.h"

namespace draftlab {

namespace {

// libtorch keys optimizer state by the parameter's TensorImpl address (as its own step() does).
std::string state_key(const at::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

torch::optim::AdamWOptions& group_options(torch::optim::OptimizerParamGroup& g) {
  return static_cast<torch::optim::AdamWOptions&>(g.options());
}

}  // namespace

double clip_gradients(const std::vector<at::Tensor>& parameters, double max_norm) {
  double sum = 0;
  for (const auto& p : parameters)
    if (p.grad().defined()) sum += p.grad().to(at::kDouble).pow(2).sum().item<double>();
  const double norm = std::sqrt(sum);
  if (max_norm > 0 && norm > max_norm)
    for (const auto& p : parameters)
      if (p.grad().defined()) p.mutable_grad().mul_(max_norm / (norm + 1e-6));
  return norm;
}

void check_trainer_options(const TrainerOptions& o) {
  check(o.steps > 0, "--steps: expected a positive number, got " + std::to_string(o.steps));
  check(o.lr > 0, "--lr: expected a positive learning rate, got " + std::to_string(o.lr));
  check(o.warmup >= 0, "--warmup: expected >= 0, got " + std::to_string(o.warmup));
  check(o.accumulate >= 1, "--accumulate: expected a positive number of micro-batches, got " +
                               std::to_string(o.accumulate));
}

Trainer::Trainer(std::vector<std::pair<std::string, at::Tensor>> parameters, TrainerOptions options,
                 std::shared_ptr<DataParallel> parallel)
    : params_(std::move(parameters)), options_(options), parallel_(std::move(parallel)) {
  check_trainer_options(options_);
  schedule_ = CosineSchedule{options_.lr, options_.warmup, options_.steps, options_.min_lr_ratio};

  // Two groups: weight decay pulls matrices towards 0; on a norm gain (init 1) it would only fight the model.
  std::vector<at::Tensor> decay, no_decay;
  for (auto& [name, p] : params_) {
    p.requires_grad_(true);
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
  }
  auto adam = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(options_.lr).betas({options_.beta1, options_.beta2}).eps(options_.eps).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, adam(options_.weight_decay));
  groups.emplace_back(no_decay, adam(0.0));
  optimizer_ = std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(options_.lr));
  if (parallel_) {
    // Every rank initialises from the same seed; the broadcast makes "the same weights" a fact, not a hope.
    std::vector<at::Tensor> ps;
    for (const auto& [name, p] : params_) ps.push_back(p);
    parallel_->broadcast_from_main(ps);
    if (!parallel_->is_main()) options_.quiet = true;
  }
}

Trainer::~Trainer() = default;

double Trainer::train_step(const std::function<at::Tensor(const BatchPart& part)>& part_loss) {
  const double lr = schedule_.at(step_);
  for (auto& g : optimizer_->param_groups()) group_options(g).lr(lr);
  optimizer_->zero_grad();
  // Each part's backward adds into .grad before the next part's forward: one part's graph alive at a time.
  const int64_t parts = options_.accumulate, rank = parallel_ ? parallel_->rank() : 0;
  const int64_t world = parallel_ ? parallel_->world_size() : 1;
  double loss = 0;
  for (int64_t k = 0; k < parts; ++k) {
    at::Tensor part = part_loss(BatchPart{rank * parts + k, world * parts});
    part.backward();
    loss += part.item<double>();
  }
  std::vector<at::Tensor> ps;
  for (const auto& [name, p] : params_) ps.push_back(p);
  // The parts' losses are shares of the step's loss, so the sum of their gradients is the step's gradient.
  if (parallel_) parallel_->sum_gradients(ps);
  if (options_.clip_by_value && options_.grad_clip > 0) {
    for (const auto& p : ps)
      if (p.grad().defined()) p.mutable_grad().clamp_(-options_.grad_clip, options_.grad_clip);
  } else {
    clip_gradients(ps, options_.grad_clip);
  }
  optimizer_->step();
  ++step_;
  const double value = parallel_ ? parallel_->sum(loss) : loss;
  curves_.train_step.push_back(step_);
  curves_.train_loss.push_back(value);
  curves_.learning_rate.push_back(lr);
  return value;
}

double Trainer::train_step(const std::function<at::Tensor()>& loss) {
  check(!parallel_ && options_.accumulate == 1,
        "trainer: a loss closure without a BatchPart computes the whole batch: it cannot split a step over ranks "
        "or micro-batches");
  return train_step([&](const BatchPart&) { return loss(); });
}

Trainer::BestEval Trainer::best_eval() const {
  // Recomputed from the curves, which the training state carries: a resumed run keeps its best and its patience.
  BestEval best;
  for (size_t i = 0; i < curves_.eval_loss.size(); ++i) {
    if (best.step < 0 || curves_.eval_loss[i] < best.loss) {
      best = {curves_.eval_step[i], curves_.eval_loss[i], 0};
    } else {
      ++best.evals_since;
    }
  }
  return best;
}

void Trainer::run(const Hooks& hooks) {
  check(static_cast<bool>(hooks.loss), "trainer: no loss function");
  check(options_.patience >= 0, "trainer: patience: expected >= 0, got " + std::to_string(options_.patience));
  check(options_.patience == 0 || (options_.eval_every > 0 && hooks.eval_loss),
        "trainer: patience (early stopping) needs validation (eval_every > 0)");
  ProgressLine progress(options_.steps, options_.log_every, options_.quiet);
  // A checkpoint is written by rank 0 alone; if that fails, every rank ends (rank 0 with the error itself).
  auto on_main = [&](const std::function<void(int64_t)>& write, const char* what) {
    if (!parallel_) return write(step_);
    std::exception_ptr failure;
    if (parallel_->is_main()) {
      try {
        write(step_);
      } catch (...) {
        failure = std::current_exception();
      }
    }
    const bool ok = parallel_->all_ok(!failure);
    if (failure) std::rethrow_exception(failure);
    check(ok, std::string("data parallel: rank 0 failed to write ") + what + " at step " + std::to_string(step_));
  };
  auto evaluate = [&] {
    if (!hooks.eval_loss) return;
    const double l = hooks.eval_loss();
    curves_.eval_step.push_back(step_);
    curves_.eval_loss.push_back(l);
    const BestEval best = best_eval();
    char line[200];
    std::snprintf(line, sizeof line, "step %ld: validation loss %.4f, perplexity %.2f%s", static_cast<long>(step_), l,
                  std::exp(l), best.step == step_ ? " (best so far)" : "");
    progress.message(line);
    if (best.step == step_ && hooks.save_best) on_main(hooks.save_best, "the best checkpoint");
  };
  auto patience_ran_out = [&] { return options_.patience > 0 && best_eval().evals_since >= options_.patience; };
  int64_t stop = options_.stop_at > 0 ? std::min(options_.stop_at, options_.steps) : options_.steps;
  if (step_ == 0 && options_.eval_every > 0) evaluate();
  if (patience_ran_out()) stop = step_;  // a resumed run that had already stopped early
  while (step_ < stop) {
    const int64_t s = step_;
    const double loss = train_step([&](const BatchPart& part) { return hooks.loss(s, part); });
    progress.update(step_, loss, curves_.learning_rate.back(), options_.tokens_per_step);
    // Validation on its own schedule (a stop_at split must not add points); a checkpoint wherever this run ends.
    if (options_.eval_every > 0 && (step_ % options_.eval_every == 0 || step_ == options_.steps)) evaluate();
    if (patience_ran_out()) {
      stop = step_;
      const BestEval best = best_eval();
      progress.message("step " + std::to_string(step_) + ": stopping early, no better validation loss for " +
                       std::to_string(best.evals_since) + " validations (best " + std::to_string(best.loss) +
                       " at step " + std::to_string(best.step) + ")");
    }
    if (hooks.save && ((options_.save_every > 0 && step_ % options_.save_every == 0) || step_ == stop)) {
      on_main(hooks.save, "the checkpoint");
      progress.message("step " + std::to_string(step_) + ": checkpoint saved");
    }
  }
  tokens_per_second_ = progress.tokens_per_second();
}

void Trainer::save_state(const std::string& path, const std::map<std::string, std::string>& metadata) const {
  std::vector<at::Tensor> keep;  // owns the float32 copies until written
  std::vector<TensorToWrite> entries;
  auto add = [&](const std::string& name, const at::Tensor& t) {
    keep.push_back(t.detach().to(at::kCPU, at::kFloat).contiguous());
    const at::Tensor& c = keep.back();
    entries.push_back({name, DType::F32, c.sizes().vec(), c.data_ptr(), static_cast<size_t>(c.nbytes())});
  };
  const auto& state = optimizer_->state();
  int64_t adam_step = 0;
  for (const auto& [name, p] : params_) {
    add("param/" + name, p);
    auto it = state.find(state_key(p));
    if (it == state.end()) continue;  // no step taken yet
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    add("exp_avg/" + name, s.exp_avg());
    add("exp_avg_sq/" + name, s.exp_avg_sq());
    adam_step = s.step();
  }
  std::map<std::string, std::string> meta = metadata;
  meta["format"] = "draftlab-training-state-1";
  meta["step"] = std::to_string(step_);
  meta["adam_step"] = std::to_string(adam_step);
  meta["curves"] = curves_.to_json();
  write_safetensors(path, entries, meta);
}

std::map<std::string, std::string> Trainer::resume(const std::string& path,
                                                   const std::map<std::string, std::string>& identity,
                                                   const std::function<std::string(const std::string&)>& absent) {
  if (!is_file(path)) throw Error("--resume: " + path + " not found");
  {
    const auto meta = SafetensorsFile(path).metadata();
    for (const auto& [key, value] : identity) {
      const auto it = meta.find(key);
      const bool same = it != meta.end() ? it->second == value : absent && absent(key) == value;
      if (!same)
        throw Error::in_file(path, "metadata " + key, "'" + value + "' (this run's options)",
                             it == meta.end() ? "none" : "'" + it->second + "'");
    }
  }
  return load_state(path);
}

std::map<std::string, std::string> Trainer::load_state(const std::string& path) {
  SafetensorsFile file(path);
  const auto& meta = file.metadata();
  auto meta_int = [&](const std::string& key) -> int64_t {
    auto it = meta.find(key);
    if (it == meta.end()) throw Error::at(path, "metadata '" + key + "' missing (not a draftlab training state?)");
    try {
      return std::stoll(it->second);
    } catch (const std::exception&) {
      throw Error::in_file(path, "metadata " + key, "an integer", "'" + it->second + "'");
    }
  };
  const int64_t step = meta_int("step"), adam_step = meta_int("adam_step");
  check(step <= options_.steps, path + ": step " + std::to_string(step) + " is past --steps " +
                                    std::to_string(options_.steps) + " (nothing left to train)");
  ComputeOptions f32;  // moments are restored bit for bit in float32, then cast to the parameter's dtype
  auto read = [&](const std::string& name, const at::Tensor& like) {
    const TensorEntry* e = file.find(name);
    if (!e) throw Error::at(path, "tensor '" + name + "' not found");
    f32.device = like.device();
    return checkpoint_tensor(*e, like.sizes().vec(), f32, " (from the model being trained)").to(like.scalar_type());
  };
  at::NoGradGuard no_grad;
  auto& state = optimizer_->state();
  for (auto& [name, p] : params_) {
    p.copy_(read("param/" + name, p));
    if (adam_step == 0) continue;
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(adam_step);
    // zeros_like keeps the parameter's strides (column-major), as AdamW's own lazy init does.
    s->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve).copy_(read("exp_avg/" + name, p)));
    s->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve).copy_(read("exp_avg_sq/" + name, p)));
    state[state_key(p)] = std::move(s);
  }
  step_ = step;
  auto c = meta.find("curves");
  curves_ = c == meta.end() ? TrainingCurves{} : TrainingCurves::from_json(c->second, path);
  return meta;
}

}  // namespace draftlab
