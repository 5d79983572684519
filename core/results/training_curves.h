// TrainingCurves - the curves of a training run, one type for every trainer (language model, every draft-head
// family) and for every place they are stored: the run's training_log.h5, its training state (JSON, for exact
// resume) and the /training/LABEL groups of results files, which copy training logs. One HDF5 codec serves both
// files, so the group layout cannot drift between them.
//
// Layout (a group: the root of training_log.h5, or /training/LABEL):
//   train/step (int64), train/loss, train/learning_rate           one entry per optimisation step
//   eval/step (int64), eval/loss, eval/perplexity                  one entry per validation pass
//   eval/<metric>                                                  the declared metrics below that a run logs:
//                                                                  [passes] for a single-value metric, else
//                                                                  [passes, columns]
//   string attributes                                              command line, config, seed, date, ...
//
// Adding a metric: one X(...) line below; the log, the results file, docs/results-schema.md and plot.py follow.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

// X(name, single_value, meaning): single_value metrics are one number per pass, the others a row per pass.
#define DRAFTLAB_TRAINING_METRICS(X)                                                                              \
  X(accuracy, true, "top-1 agreement of the head's next-token prediction with the target's on the validation "  \
                    "windows (EAGLE and EAGLE-3 heads)")                                                         \
  X(alpha, false, "chain acceptance n-alpha on the validation windows, one column per n = 0, 1, ... (EAGLE "     \
                  "heads: 0..4; EAGLE-3 heads: 0..7)")                                                          \
  X(alpha_official, false, "n-alpha as the official EAGLE code's getkacc counts it, one column per n = 0..4 "  \
                           "(EAGLE heads): the fraction of start rows whose first n + 1 chain steps all agree, "    \
                           "a start that failed earlier counting as a miss at every later n; starts and steps "     \
                           "only where the window's token is the target's greedy choice (the head's own argmax "  \
                           "is then the fed token)")                                                             \
  X(head_accuracy, false, "each parallel head's top-1 accuracy on the validation windows, one column per head "  \
                          "(Medusa, Hydra)")

namespace draftlab {

struct TrainingMetric {
  const char* name;
  bool single_value;
  const char* meaning;
};

// Every declared metric, in declaration order.
const std::vector<TrainingMetric>& training_metrics();
// Throws Error for an undeclared name, listing the declared ones.
const TrainingMetric& find_training_metric(const std::string& name);

struct TrainingCurves {
  std::vector<int64_t> train_step;  // steps done when the loss was measured (1-based)
  std::vector<double> train_loss;
  std::vector<double> learning_rate;
  std::vector<int64_t> eval_step;  // 0 = before the first step
  std::vector<double> eval_loss;
  // Declared metrics (training_metrics()) by name: one row per validation pass, every row of a metric the same
  // width (1 for a single-value metric). Absent: not logged by this run.
  std::map<std::string, std::vector<std::vector<double>>> eval_metrics;
  std::map<std::string, std::string> attributes;

  // exp(eval_loss), as eval/perplexity stores it.
  std::vector<double> eval_perplexity() const;
  // A metric's rows, or nullptr when not logged.
  const std::vector<std::vector<double>>* metric(const std::string& name) const;
  // Appends one validation pass's value(s) of a declared metric.
  void add_metric(const std::string& name, std::vector<double> values);

  // Throws Error::in_file(source, where/...) on lengths that differ from their step column, an undeclared metric,
  // rows of different widths, or a single-value metric with several columns.
  void validate(const std::string& source, const std::string& where) const;

  // JSON text (curves and metrics; not the attributes), so a training state can carry the curves of the steps
  // before a resume.
  std::string to_json() const;
  static TrainingCurves from_json(const std::string& text, const std::string& source);
};

// The training log file: written to PATH.tmp, then renamed; Error naming the path on failure.
void write_training_log(const std::string& path, const TrainingCurves& curves);
// Reads a training log (or throws Error naming the path when it is not one).
TrainingCurves read_training_log(const std::string& path);

}  // namespace draftlab

namespace H5 {
class Group;
}

namespace draftlab {
// The codec of one training group (results_file.cpp writes /training/LABEL with it). `where` names the group in
// messages ("" for a log file's root).
void write_training_group(H5::Group& group, const TrainingCurves& curves);
TrainingCurves read_training_group(const H5::Group& group, const std::string& source, const std::string& where);
}  // namespace draftlab
