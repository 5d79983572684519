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
  check(o.context > 0 && o.context <= c.max_position_embeddings,
        "--context: expected 1.." + std::to_string(c.max_position_embeddings) + ", got " + std::to_string(o.context));
  check_training_run_options(o);
}

LmTrainingResult train_language_model(const LmTrainingOptions& o, const TextDataset& data) {
  const ModelConfig& c = o.config;
  check_lm_training_options(o);
  DataParallel* parallel = o.parallel.get();
  LlamaWeights weights = random_llama_weights(c, o.seed, o.compute);
  const RotaryEmbedding rope(c, o.compute);
  // What a resumed run must share with the state it continues (another shape or seed would not be the same run).
  TrainingRun run(o, trainable_parameters(c, weights),
                  {{"config", c.to_hf_json().dump()},
                   {"seed", std::to_string(o.seed)},
                   {"batch", std::to_string(o.batch)},
                   {"context", std::to_string(o.context)}});
  if ((!parallel || parallel->is_main()) && !o.tokenizer_path.empty()) copy_tokenizer(o.tokenizer_path, o.out_dir);

  const at::Tensor val = data.validation_windows(o.context, o.eval_windows);
  ComputeOptions saving = o.compute;
  saving.cpu_path = CpuPath::Reference;  // only saved: no native copy of the weights
  auto loss = [&](int64_t step, const BatchPart& part) {
    const at::Tensor windows = data.train_batch(o.batch, o.context, o.seed, step);
    if (part.whole()) return language_model_training_loss(c, weights, rope, windows);
    // The part's rows; their mean loss weighted by their share of the rows, so the parts' losses add up to the
    // batch's mean.
    const BatchRows rows = part.rows(o.batch);
    return language_model_training_loss(c, weights, rope, windows.narrow(0, rows.first, rows.count)) *
           (static_cast<double>(rows.count) / static_cast<double>(o.batch));
  };
  return run.run(
      loss, [&] { return validation_loss(c, weights, rope, val, o.batch, parallel); },
      [&] { LlamaModel(c, inference_weights(c, weights), saving).save_hf(o.out_dir, o.save_dtype); },
      {{"config", c.to_hf_json().dump(2)}});
}

}  // namespace draftlab
