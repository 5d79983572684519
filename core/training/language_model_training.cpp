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
// The loss of windows under the run's objective; `seed` for a random one.
at::Tensor objective_loss(const LmTrainingOptions& o, const LlamaWeights& w, const RotaryEmbedding& rope,
                          const at::Tensor& windows, uint64_t seed) {
  if (o.objective) return o.objective->loss(o.config, w, rope, windows, seed);
  return language_model_training_loss(o.config, w, rope, windows);
}

// A seed for step `step` of a run seeded `seed` (splitmix64's finaliser: nearby steps, unrelated streams).
uint64_t step_seed(uint64_t seed, int64_t step) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(step) + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The starting weights: random, or a trainable float32 copy of --init's.
LlamaWeights initial_weights(const LmTrainingOptions& o) {
  if (o.init_from.empty()) return random_llama_weights(o.config, o.seed, o.compute);
  ComputeOptions reading = o.compute;
  reading.cpu_path = CpuPath::Reference;  // the float32 tensors themselves, not a packed copy
  const auto model = LlamaModel::load(o.init_from, reading);
  ModelConfig given = o.config, loaded = model->config();
  given.pard_token = loaded.pard_token = -1;  // what fine-tuning may change
  given.max_position_embeddings = loaded.max_position_embeddings;
  if (given.to_hf_json() != loaded.to_hf_json())
    throw Error("--init " + o.init_from + ": its config.json differs from the model being trained: expected " +
                given.to_hf_json().dump() + ", got " + loaded.to_hf_json().dump());
  return inference_weights(o.config, model->weights());  // detached clones: the trainer owns them
}

double validation_loss(const LmTrainingOptions& o, const LlamaWeights& w, const RotaryEmbedding& rope,
                       const at::Tensor& windows, int64_t batch, DataParallel* parallel) {
  const ModelConfig& c = o.config;
  at::NoGradGuard no_grad;
  const int64_t n = windows.size(0), batches = (n + batch - 1) / batch;
  std::vector<double> sums(static_cast<size_t>(batches), 0.0);
  for (int64_t k = 0; k < batches; ++k) {
    if (parallel && !parallel->takes(k)) continue;
    const auto part = windows.narrow(0, k * batch, std::min(batch, n - k * batch));
    // The objective's own loss (a fixed seed per batch: the same every pass), or the plain next-token loss.
    const at::Tensor loss = o.objective ? o.objective->loss(c, w, rope, part, static_cast<uint64_t>(k))
                                        : next_token_loss(c, w, rope, part);
    sums[static_cast<size_t>(k)] = loss.item<double>() * static_cast<double>(part.size(0));
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
  LlamaWeights weights = initial_weights(o);
  const RotaryEmbedding rope(c, o.compute);
  // What a resumed run must share with the state it continues (another shape or seed would not be the same run).
  // Keys an older state lacks stood for a run from random weights with the next-token objective.
  const std::string objective = o.objective ? o.objective->describe() : "next-token";
  TrainingRun run(o, trainable_parameters(c, weights),
                  {{"config", c.to_hf_json().dump()},
                   {"seed", std::to_string(o.seed)},
                   {"batch", std::to_string(o.batch)},
                   {"context", std::to_string(o.context)},
                   {"init", o.init_from},
                   {"objective", objective}},
                  [](const std::string& key) { return key == "objective" ? std::string("next-token") : std::string(); });
  if ((!parallel || parallel->is_main()) && !o.tokenizer_path.empty()) copy_tokenizer(o.tokenizer_path, o.out_dir);

  const at::Tensor val = data.validation_windows(o.context, o.eval_windows);
  ComputeOptions saving = o.compute;
  saving.cpu_path = CpuPath::Reference;  // only saved: no native copy of the weights
  auto loss = [&](int64_t step, const BatchPart& part) {
    const at::Tensor windows = data.train_batch(o.batch, o.context, o.seed, step);
    const uint64_t seed = step_seed(o.seed, step);  // the same for every part of the step
    if (part.whole()) return objective_loss(o, weights, rope, windows, seed);
    // The part's rows; their mean loss weighted by their share of the rows, so the parts' losses add up to the
    // batch's mean.
    const BatchRows rows = part.rows(o.batch);
    return objective_loss(o, weights, rope, windows.narrow(0, rows.first, rows.count), seed) *
           (static_cast<double>(rows.count) / static_cast<double>(o.batch));
  };
  std::map<std::string, std::string> attributes{{"config", c.to_hf_json().dump(2)}, {"objective", objective}};
  if (!o.init_from.empty()) attributes["init"] = o.init_from;
  return run.run(
      loss, [&] { return validation_loss(o, weights, rope, val, o.batch, parallel); },
      [&] { LlamaModel(c, inference_weights(c, weights), saving).save_hf(o.out_dir, o.save_dtype); }, attributes);
}

}  // namespace draftlab
