#include "core/training/language_model_training.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/model/llama_model.h"
#include "core/model/training_forward.h"

namespace draftlab {

namespace {

// Where the tokenizer copy goes: tokenizer.json keeps its name (generate finds it without --tokenizer).
std::string tokenizer_copy_name(const std::string& path) {
  if (is_directory(path)) return "tokenizer.json";
  return std::filesystem::path(path).filename().string();
}

void copy_tokenizer(const std::string& path, const std::string& dir) {
  const std::string source = is_directory(path) ? path + "/tokenizer.json" : path;
  write_file_atomically(dir + "/" + tokenizer_copy_name(path), read_text_file(source));
}

// Mean loss over fixed validation windows, in batches, without building a graph. Data parallel: rank r takes
// batches r, r + world, ...; each batch's sum has one slot, so the total adds the same numbers in the same order
// as one process does.
double validation_loss(const ModelConfig& c, const LlamaWeights& w, const RotaryEmbedding& rope,
                       const at::Tensor& windows, int64_t batch, DataParallel* parallel) {
  at::NoGradGuard no_grad;
  const int64_t n = windows.size(0), batches = (n + batch - 1) / batch;
  std::vector<double> sums(static_cast<size_t>(batches), 0.0);
  for (int64_t k = 0; k < batches; ++k) {
    if (parallel && !parallel->takes(k)) continue;
    const auto part = windows.narrow(0, k * batch, std::min(batch, n - k * batch));
    sums[static_cast<size_t>(k)] = next_token_loss(c, w, rope, part).item<double>() * static_cast<double>(part.size(0));
  }
  if (parallel) sums = parallel->sum(sums);
  double total = 0;
  for (double s : sums) total += s;
  return total / static_cast<double>(n);
}

}  // namespace

void check_lm_training_options(const LmTrainingOptions& o) {
  const ModelConfig& c = o.config;
  c.validate("model options");
  check(o.batch > 0, "--batch: expected a positive number, got " + std::to_string(o.batch));
  check(o.context > 0 && o.context <= c.max_position_embeddings,
        "--context: expected 1.." + std::to_string(c.max_position_embeddings) + ", got " + std::to_string(o.context));
  check(!o.out_dir.empty(), "--out: expected a directory");
  check(!o.keep_best || o.trainer.eval_every > 0, "--keep-best: needs validation (--eval-every > 0)");
  check_trainer_options(o.trainer);
}

LmTrainingResult train_language_model(const LmTrainingOptions& o, const TextDataset& data) {
  const ModelConfig& c = o.config;
  check_lm_training_options(o);
  DataParallel* parallel = o.parallel.get();
  check_batch_parts(o.batch, parallel ? parallel->world_size() : 1, o.trainer.accumulate);
  const bool writer = !parallel || parallel->is_main();
  const std::string state_path = o.out_dir + "/training_state.safetensors";
  const std::string config_text = c.to_hf_json().dump();

  LlamaWeights weights = random_llama_weights(c, o.seed, o.compute);
  const RotaryEmbedding rope(c, o.compute);
  TrainerOptions topt = o.trainer;
  topt.tokens_per_step = o.batch * o.context;
  Trainer trainer(trainable_parameters(c, weights), topt, o.parallel);
  if (writer) std::filesystem::create_directories(o.out_dir);  // after the trainer has checked its options
  // What a resumed run must share with the state it continues (another shape or seed would not be the same run).
  const std::map<std::string, std::string> identity = {{"config", config_text},
                                                       {"seed", std::to_string(o.seed)},
                                                       {"batch", std::to_string(o.batch)},
                                                       {"context", std::to_string(o.context)}};
  if (o.resume) trainer.resume(state_path, identity);
  if (writer && !o.tokenizer_path.empty()) copy_tokenizer(o.tokenizer_path, o.out_dir);

  const at::Tensor val = data.validation_windows(o.context, o.eval_windows);
  const std::map<std::string, std::string> attributes = {
      {"command_line", o.command_line}, {"config", c.to_hf_json().dump(2)}, {"seed", std::to_string(o.seed)},
      {"batch", std::to_string(o.batch)}, {"context", std::to_string(o.context)}};

  ComputeOptions saving = o.compute;
  saving.cpu_path = CpuPath::Reference;  // only saved: no native copy of the weights
  auto save_model = [&] { LlamaModel(c, inference_weights(c, weights), saving).save_hf(o.out_dir, o.save_dtype); };
  Trainer::Hooks hooks;
  hooks.loss = [&](int64_t step, const BatchPart& part) {
    const at::Tensor windows = data.train_batch(o.batch, o.context, o.seed, step);
    if (part.whole()) return language_model_training_loss(c, weights, rope, windows);
    // The part's rows; their mean loss weighted by their share of the rows, so the parts' losses add up to the
    // batch's mean.
    const BatchRows rows = part.rows(o.batch);
    return language_model_training_loss(c, weights, rope, windows.narrow(0, rows.first, rows.count)) *
           (static_cast<double>(rows.count) / static_cast<double>(o.batch));
  };
  hooks.eval_loss = [&] { return validation_loss(c, weights, rope, val, o.batch, parallel); };
  // The training state last: it is what --resume continues from, so once it holds step N every other file of
  // the checkpoint holds step N too. (A run killed before it resumes from the previous state and writes the rest
  // again; one killed after it has nothing left to write.)
  hooks.save = [&](int64_t) {
    if (!o.keep_best) save_model();
    auto attrs = attributes;
    attrs["date"] = utc_timestamp();
    const Trainer::BestEval best = trainer.best_eval();
    if (best.step >= 0) {
      attrs["best_step"] = std::to_string(best.step);
      attrs["best_validation_loss"] = std::to_string(best.loss);
      attrs["model_safetensors"] = o.keep_best ? "best validation checkpoint" : "last checkpoint";
    }
    TrainingCurves log = trainer.curves();
    log.attributes = attrs;
    write_training_log(o.out_dir + "/training_log.h5", log);
    trainer.save_state(state_path, identity);
  };
  if (o.keep_best) hooks.save_best = [&](int64_t) { save_model(); };
  trainer.run(hooks);

  LmTrainingResult result;
  for (const auto& [name, p] : trainable_parameters(c, weights)) result.parameters += p.numel();
  result.tokens_per_second = trainer.tokens_per_second();
  result.curves = trainer.curves();
  result.best = trainer.best_eval();
  return result;
}

}  // namespace draftlab
