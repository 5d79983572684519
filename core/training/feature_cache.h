// FeatureCache - the frozen target's features of a fixed set of training windows, in an HDF5 file, so that
// repeated epochs of head training skip the target forward (`train-head --feature-cache FILE.h5`).
//
// What it holds: the windows of the first `steps` training steps, exactly as on-the-fly training draws them
// (rows [s*batch, (s+1)*batch) = TextDataset::train_rows(batch, context, seed, s)), their loss masks when the data
// has them, and the target's features of every window token, [N, context + 1, d]:
//   /windows     int64   [N, T + 1]
//   /loss_mask   uint8   [N, T + 1]       (only for masked data, or data sampled Whole)
//   /lengths     int64   [N]              real tokens per row (only for data sampled Whole: rows are padded)
//   /features    float32 or IEEE float16 [N, T + 1, width]   (one chunk per window; width d, or (k + 1) d with
//                EAGLE-3's k feature layers in front of the final normed hidden state: training_layer_features)
//   root attributes: format, model_checksum, model_path, tokenizer, data, data_source, context, batch, seed,
//                    steps, hidden_size, feature_layers (when any), feature_dtype, date
// Features are computed with training_features() on the same [batch, T + 1] windows that training would pass to
// the target, so a float32 cache replays the first `steps` steps bit for bit. Step s >= steps draws `batch` rows
// uniformly from the whole cache with a generator seeded by (seed, s): later epochs reshuffle, and a resumed run
// draws the same rows.
//
// Data parallel (a DataParallel given to open_or_build): the ranks compute the features of steps r, r + world, ...
// and rank 0 gathers and writes them, so the file is the one process's, bit for bit; training then reads each
// step's windows, masks and lengths whole and only its own rows' features.
//
// Identity: a cache is refused (Error naming the file, the field and both values) unless model_checksum, tokenizer,
// data, context, batch, seed and hidden_size equal this run's. The file is written to FILE.tmp and renamed.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/distributed/data_parallel.h"
#include "core/model/llama_model.h"
#include "core/text/tokenizer.h"
#include "core/training/batch_part.h"
#include "core/training/text_dataset.h"

namespace draftlab {

class FeatureCacheFile;

// What a cache is built from; every field but model_path and data_source must match for a cache to be used.
struct FeatureCacheIdentity {
  std::string model_checksum;  // model_weights_checksum(target)
  std::string model_path;      // recorded for messages only
  std::string tokenizer;       // tokenizer_checksum(tokenizer), or any string naming the vocabulary
  std::string data;            // TextDataset::fingerprint()
  std::string data_source;     // recorded for messages only
  int64_t context = 0, batch = 0, hidden_size = 0;
  uint64_t seed = 0;
  std::vector<int64_t> feature_layers;  // the target layers whose residual precedes the final features (EAGLE-3)
  int64_t width() const { return (static_cast<int64_t>(feature_layers.size()) + 1) * hidden_size; }

  std::map<std::string, std::string> fields() const;  // the compared fields, by attribute name
};

// 16 hex digits hashing every weight tensor of the target (values, shapes and dtype as loaded).
std::string model_weights_checksum(const LlamaModel& target);
// 16 hex digits hashing the vocabulary (every piece, BOS and EOS ids).
std::string tokenizer_checksum(const Tokenizer& tokenizer);

// `train-head --feature-cache` settings (HeadTrainingOptions::feature_cache).
struct FeatureCacheOptions {
  std::string path;                   // empty: target features on the fly
  int64_t steps = 0;                  // when building: the steps whose windows it holds (0: the run's --steps)
  at::ScalarType dtype = at::kFloat;  // when building: kFloat (replays bit for bit) or kHalf (half the size)
  bool quiet = false;
  std::string model_path, tokenizer, data_source;  // identity parts the trainer cannot see (tokenizer_checksum)
};

struct CachedBatch {
  at::Tensor windows;   // [B, T + 1] int64
  at::Tensor mask;      // [B, T + 1] float32 0/1, undefined when the data has no loss mask
  at::Tensor lengths;   // [B] int64 real tokens per row, undefined unless the data was sampled Whole
  at::Tensor features;  // [B, T + 1, width] in the target's compute dtype
};

class FeatureCache {
 public:
  // Computes and writes a cache of `steps` steps' windows (feature_dtype kFloat or kHalf). progress(s, steps) after
  // each step. Throws Error naming the file when it cannot be written (no partial file is left).
  // `parallel`: every rank calls build, rank 0 alone writes (see the header comment).
  static void build(const std::string& path, const LlamaModel& target, const TextDataset& data,
                    const FeatureCacheIdentity& identity, int64_t steps, at::ScalarType feature_dtype,
                    const std::function<void(int64_t, int64_t)>& progress = {}, DataParallel* parallel = nullptr);

  // Opens a cache and checks it against `expected` (and the target's compute options). Throws Error naming the
  // file and the first mismatching field with both values.
  static std::unique_ptr<FeatureCache> open(const std::string& path, const LlamaModel& target,
                                            const FeatureCacheIdentity& expected);

  // Opens options.path, building it first when absent (with a progress line unless quiet), for training windows
  // of (batch, context, seed) on `data`. Throws Error as build() and open() do.
  static std::unique_ptr<FeatureCache> open_or_build(const FeatureCacheOptions& options, const LlamaModel& target,
                                                     const TextDataset& data, int64_t batch, int64_t context,
                                                     uint64_t seed, int64_t run_steps,
                                                     const std::vector<int64_t>& feature_layers = {},
                                                     DataParallel* parallel = nullptr);

  ~FeatureCache();

  // The batch of training step `step` (see the header comment).
  CachedBatch batch(int64_t step) const;
  // The same step's windows, mask and lengths whole, but the features of `rows` only (a rank's or a micro-batch's).
  CachedBatch batch(int64_t step, BatchRows rows) const;

  int64_t steps() const { return steps_; }
  int64_t windows() const { return steps_ * batch_; }
  bool has_mask() const;
  at::ScalarType feature_dtype() const { return feature_dtype_; }
  const std::map<std::string, std::string>& attributes() const;

 private:
  FeatureCache() = default;
  // The listed rows; features only of the list's entries [features_of.first, + count).
  CachedBatch read_rows(const std::vector<int64_t>& rows, BatchRows features_of) const;
  std::vector<int64_t> rows_of_step(int64_t step) const;

  std::unique_ptr<FeatureCacheFile> file_;  // the HDF5 side (feature_cache_file.h)
  int64_t steps_ = 0, batch_ = 0, span_ = 0, hidden_ = 0, vocab_ = 0;
  uint64_t seed_ = 0;
  at::ScalarType feature_dtype_ = at::kFloat, compute_dtype_ = at::kFloat;
  at::Device device_ = at::kCPU;
};

}  // namespace draftlab
