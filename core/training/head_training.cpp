#include "core/training/head_training.h"

#include <filesystem>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/safetensors.h"
#include "core/model/training_forward.h"

namespace draftlab {

at::Tensor head_batch_features(const LlamaModel& target, const at::Tensor& windows,
                               const std::vector<int64_t>& feature_layers) {
  at::NoGradGuard no_grad;
  const RotaryEmbedding rope(target.config(), target.options());
  return training_layer_features(target.config(), target.weights(), rope, windows.to(target.options().device),
                                 feature_layers);
}

namespace {

// What one pass trains on of a step's rows (tokens, mask, lengths; the features come after, for these rows): all
// of them, or a part (a rank's share, or a micro-batch of it).
HeadBatch part_rows(const RowBatch& r, const BatchPart& part) {
  if (part.whole()) return {r.tokens, r.mask, {}, r.lengths};
  const BatchRows rows = part.rows(r.tokens.size(0));
  auto cut = [&](const at::Tensor& t) { return t.defined() ? t.narrow(0, rows.first, rows.count) : at::Tensor(); };
  return {cut(r.tokens), cut(r.mask), {}, cut(r.lengths), {rows.first, r.tokens.size(0), r.mask, r.lengths}};
}

// "accuracy 0.4123, alpha 0.41 0.30 ..." for the validation line.
std::string metrics_line(const std::map<std::string, std::vector<double>>& values) {
  std::string line;
  for (const TrainingMetric& m : training_metrics()) {
    auto it = values.find(m.name);
    if (it == values.end()) continue;
    line += std::string(", ") + m.name;
    for (double v : it->second) {
      char buf[24];
      std::snprintf(buf, sizeof buf, " %.4f", v);
      line += buf;
    }
  }
  return line;
}

// Validation in batches of --batch rows, with their features computed once (the target is frozen), a batch at a
// time (the target's forward never holds more rows than a training step's). Data parallel: rank r evaluates
// batches r, r + world, ... (every rank at least one, so each knows the family's metrics) and computes only
// their features; with fewer batches than ranks every rank evaluates all.
class HeadValidation {
 public:
  HeadValidation(const LlamaModel& target, const TextDataset& data, const HeadTrainingOptions& o,
                 const std::vector<int64_t>& layers, DataParallel* parallel)
      : parallel_(parallel) {
    const RowBatch v = data.validation_rows(o.context, o.eval_windows);
    rows_ = v.tokens.size(0);
    const int64_t batches = (rows_ + o.batch - 1) / o.batch;
    sharded_ = parallel && batches >= parallel->world_size();
    batches_.resize(static_cast<size_t>(batches));  // empty where another rank evaluates
    for (int64_t k = 0; k < batches; ++k) {
      if (sharded_ && !parallel->takes(k)) continue;
      const int64_t i = k * o.batch, m = std::min(o.batch, rows_ - i);
      HeadBatch& b = batches_[static_cast<size_t>(k)];
      b = {v.tokens.narrow(0, i, m), v.mask.defined() ? v.mask.narrow(0, i, m) : at::Tensor(), {},
           v.lengths.narrow(0, i, m)};
      b.features = head_batch_features(target, b.windows, layers);
    }
  }

  struct Pass {
    double loss = 0.0;                                    // mean over the validation rows
    std::map<std::string, std::vector<double>> metrics;   // the family's, hits / tries per column
  };
  // One validation pass; every rank returns the same numbers.
  Pass run(TrainableHead& head) const {
    at::NoGradGuard no_grad;
    const size_t batches = batches_.size();
    std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> counts;
    // Each batch's loss has one slot, so the ranks' total adds the same numbers in the same order as one process.
    std::vector<double> losses(batches, 0.0);
    for (size_t k = 0; k < batches; ++k) {
      const HeadBatch& part = batches_[k];
      if (!part.windows.defined()) continue;
      const HeadEvaluation e = head.evaluate(part);
      losses[k] = e.loss * static_cast<double>(part.windows.size(0));
      for (const auto& [name, columns] : e.counts) {
        auto& sum = counts[name];
        sum.resize(std::max(sum.size(), columns.size()));
        for (size_t c = 0; c < columns.size(); ++c) sum[c].first += columns[c].first, sum[c].second += columns[c].second;
      }
    }
    if (sharded_) {  // losses, then every count, summed over the ranks in one message (counts are exact in float64)
      std::vector<double> flat = losses;
      for (const auto& [name, columns] : counts)
        for (const auto& [hits, tries] : columns) flat.push_back(static_cast<double>(hits)), flat.push_back(static_cast<double>(tries));
      flat = parallel_->sum(flat);
      std::copy(flat.begin(), flat.begin() + static_cast<std::ptrdiff_t>(batches), losses.begin());
      size_t at = batches;
      for (auto& [name, columns] : counts)
        for (auto& [hits, tries] : columns) hits = static_cast<int64_t>(flat[at++]), tries = static_cast<int64_t>(flat[at++]);
    }
    Pass pass;
    for (double l : losses) pass.loss += l;
    pass.loss /= static_cast<double>(rows_);
    for (const auto& [name, columns] : counts)
      for (const auto& [hits, tries] : columns)
        pass.metrics[name].push_back(tries ? static_cast<double>(hits) / static_cast<double>(tries) : 0.0);
    return pass;
  }

 private:
  DataParallel* parallel_;
  int64_t rows_ = 0;
  bool sharded_ = false;
  std::vector<HeadBatch> batches_;
};

}  // namespace

void check_recipe(const std::string& recipe) {
  check(recipe == "paper" || recipe == "official", "--recipe: expected paper or official, got '" + recipe + "'");
}

HeadTrainingResult train_draft_head(const LlamaModel& target, TrainableHead& head, const HeadTrainingOptions& o,
                                    const TextDataset& data) {
  const int64_t max_context = target.config().max_position_embeddings - 1;
  check(o.context >= head.min_context() && o.context <= max_context,
        "--context: expected " + std::to_string(head.min_context()) + ".." + std::to_string(max_context) +
            " for --kind " + head.family_name() + " (windows are context + 1 tokens), got " + std::to_string(o.context));
  DataParallel* parallel = o.parallel.get();
  std::map<std::string, std::string> identity = head.identity();
  identity["family"] = head.family_name();
  identity["seed"] = std::to_string(o.seed);
  identity["batch"] = std::to_string(o.batch);
  identity["context"] = std::to_string(o.context);
  identity["samples"] = sampling_name(data.sampling());
  // States written before a key existed stand for its default (the family for states of one-family trainers,
  // windows for states written before whole-sequence sampling).
  TrainingRun run(o, head.parameters(), identity, [&](const std::string& key) {
    return key == "family"    ? head.family_name()
           : key == "samples" ? sampling_name(Sampling::Windows)
                              : head.identity_default(key);
  });
  Trainer& trainer = run.trainer();
  // States written before the curves carried the metrics kept them beside.
  const auto& meta = run.resumed_metadata();
  if (auto it = meta.find("head_eval"); it != meta.end() && trainer.curves().eval_metrics.empty())
    for (const auto& [name, rows] : TrainingCurves::from_json(it->second, o.out_dir + "/training_state.safetensors").eval_metrics)
      for (const auto& row : rows) trainer.add_eval_metric(name, row);

  const std::vector<int64_t> layers = head.feature_layers();
  const HeadValidation validation(target, data, o, layers, parallel);
  // Built on first use (the target's features of the first epoch's windows), then read back on every run.
  const std::unique_ptr<FeatureCache> cache =
      o.feature_cache.path.empty() ? nullptr
                                   : FeatureCache::open_or_build(o.feature_cache, target, data, o.batch, o.context,
                                                                 o.seed, o.trainer.steps, layers, parallel);
  auto loss = [&](int64_t step, const BatchPart& part) {
    HeadBatch b;
    if (cache) {  // the same windows as on the fly for the cached steps, the target's features read back
      const CachedBatch c = part.whole() ? cache->batch(step) : cache->batch(step, part.rows(o.batch));
      b = part_rows({c.windows, c.mask, c.lengths}, part);
      b.features = c.features;  // of this part's rows only
    } else {
      b = part_rows(data.train_rows(o.batch, o.context, o.seed, step), part);
      b.features = head_batch_features(target, b.windows, layers);
    }
    return head.loss(b, step);
  };
  auto eval_loss = [&] {
    const HeadValidation::Pass pass = validation.run(head);
    for (const auto& [name, values] : pass.metrics) trainer.add_eval_metric(name, values);
    if (!trainer.options().quiet)
      std::fprintf(stderr, "\nvalidation at step %ld: loss %.4f%s\n", static_cast<long>(trainer.step()), pass.loss,
                   metrics_line(pass.metrics).c_str());
    return pass.loss;
  };
  // How much data the head saw (EAGLE-3 Figure 1 plots against it): the training split's tokens.
  std::map<std::string, std::string> attributes = {{"train_tokens", std::to_string(data.train_tokens())}};
  if (!o.data_description.empty()) attributes["data"] = o.data_description;
  return run.run(loss, eval_loss, [&] { head.save(o.out_dir, o.save_dtype); }, attributes);
}

}  // namespace draftlab
