// The curves of a training run and their HDF5 log.
//   /train/step, /train/loss, /train/learning_rate   one entry per optimisation step
//   /eval/step, /eval/loss, /eval/perplexity         one entry per validation pass
//   /eval/accuracy, /eval/alpha [passes, 5]          EAGLE heads only (present when filled): top-1 accuracy and
//                                                    chain acceptance 0-alpha .. 4-alpha per validation pass
//   /eval/head_accuracy [passes, K]                  parallel heads (Medusa) only: each head's top-1 accuracy
// plus string attributes on the root group (command line, config, seed, date, ...). Written atomically.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace draftlab {

struct TrainingCurves {
  std::vector<int64_t> train_step;  // steps done when the loss was measured (1-based)
  std::vector<double> train_loss;
  std::vector<double> learning_rate;
  std::vector<int64_t> eval_step;  // 0 = before the first step
  std::vector<double> eval_loss;
  // Optional (EAGLE head training; empty elsewhere and in logs without them): per validation pass.
  std::vector<double> eval_accuracy;
  std::vector<std::vector<double>> eval_alpha;  // each [0-alpha, 1-alpha, ...], all rows the same length
  // Optional (parallel-head training): per validation pass, each head's top-1 accuracy, all rows the same length.
  std::vector<std::vector<double>> eval_head_accuracy;

  // JSON text, so a training-state file can carry the curves of the steps before a resume.
  std::string to_json() const;
  static TrainingCurves from_json(const std::string& text, const std::string& source);
};

// Writes `path` (a temporary file beside it, then rename). Throws Error naming the path on failure.
void write_training_log(const std::string& path, const TrainingCurves& curves,
                        const std::map<std::string, std::string>& attributes);

// Reads a log written by write_training_log back (tests, tools); attributes are filled when non-null.
// Throws Error naming the path when it is not such a file.
TrainingCurves read_training_log(const std::string& path, std::map<std::string, std::string>* attributes = nullptr);

// The current UTC time as ISO 8601, for the "date" attribute.
std::string utc_timestamp();

}  // namespace draftlab
