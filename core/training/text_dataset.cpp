#include "core/training/text_dataset.h"

#include <cmath>
#include <cstdio>
#include <random>

#include "core/base/error.h"
#include "core/base/file_bytes.h"

namespace draftlab {

namespace {

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

std::vector<std::string> split_stories(const std::string& text) {
  std::vector<std::string> stories;
  std::string current;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    if (blank(line)) {
      if (!trim(current).empty()) stories.push_back(trim(current));
      current.clear();
    } else {
      current += line + "\n";
    }
    pos = end + 1;
  }
  if (!trim(current).empty()) stories.push_back(trim(current));
  return stories;
}

TextDataset::TextDataset(const std::string& corpus_path, const Tokenizer& tokenizer, int64_t validation_every) {
  check(validation_every >= 2, "validation_every: expected >= 2, got " + std::to_string(validation_every));
  check(tokenizer.bos_id() >= 0, corpus_path + ": the tokenizer has no BOS token to start each story with");
  const std::vector<std::string> stories = split_stories(read_text_file(corpus_path));
  if (static_cast<int64_t>(stories.size()) < validation_every)
    throw Error::in_file(corpus_path, "stories (blank-line separated)",
                         "at least " + std::to_string(validation_every) + " for a validation split",
                         std::to_string(stories.size()));
  for (size_t i = 0; i < stories.size(); ++i) {
    std::vector<int32_t>& out = static_cast<int64_t>(i % validation_every) == validation_every - 1 ? validation_ : train_;
    const std::vector<int32_t> ids = tokenizer.encode(stories[i], /*add_bos=*/true);
    out.insert(out.end(), ids.begin(), ids.end());
  }
  stories_ = static_cast<int64_t>(stories.size());
}

TextDataset::TextDataset(std::vector<int32_t> train, std::vector<int32_t> validation)
    : train_(std::move(train)), validation_(std::move(validation)) {}

TextDataset::TextDataset(std::vector<int32_t> train, std::vector<int32_t> validation, std::vector<uint8_t> train_mask,
                         std::vector<uint8_t> validation_mask, int64_t sequences)
    : train_(std::move(train)),
      validation_(std::move(validation)),
      train_mask_(std::move(train_mask)),
      validation_mask_(std::move(validation_mask)),
      stories_(sequences),
      masked_(!train_mask_.empty() || !validation_mask_.empty()) {
  check(!masked_ || (train_mask_.size() == train_.size() && validation_mask_.size() == validation_.size()),
        "TextDataset: a loss mask must have one entry per token (training " + std::to_string(train_mask_.size()) +
            " for " + std::to_string(train_.size()) + " tokens, validation " +
            std::to_string(validation_mask_.size()) + " for " + std::to_string(validation_.size()) + ")");
}

void check_training_fraction(double fraction) {
  check(fraction > 0 && fraction <= 1, "--data-fraction: expected a number in (0, 1], got " + std::to_string(fraction));
}

void TextDataset::keep_training_fraction(double fraction) {
  check_training_fraction(fraction);
  const auto keep = static_cast<size_t>(std::llround(fraction * static_cast<double>(train_.size())));
  train_.resize(keep);
  if (masked_) train_mask_.resize(keep);
}

std::vector<int64_t> TextDataset::train_offsets(int64_t batch, int64_t context, uint64_t seed, int64_t step) const {
  const int64_t n = train_tokens(), span = context + 1;
  if (n < span)
    throw Error("--context: expected at most " + std::to_string(n - 1) + " (the training split has " +
                std::to_string(n) + " tokens), got " + std::to_string(context));
  // A generator per step: batches depend on (seed, step) only, so a resumed run draws the same ones.
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(step),
                    static_cast<uint32_t>(static_cast<uint64_t>(step) >> 32)};
  std::mt19937_64 gen(seq);
  const uint64_t offsets = static_cast<uint64_t>(n - span + 1);
  std::vector<int64_t> starts(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) starts[b] = static_cast<int64_t>(gen() % offsets);
  return starts;
}

std::vector<int64_t> TextDataset::validation_offsets(int64_t context, int64_t max_windows) const {
  const int64_t n = validation_tokens(), span = context + 1;
  const int64_t available = n / span;
  if (available == 0)
    throw Error("--context: expected at most " + std::to_string(n - 1) + " (the validation split has " +
                std::to_string(n) + " tokens), got " + std::to_string(context));
  const int64_t count = std::min(available, max_windows);
  std::vector<int64_t> starts(static_cast<size_t>(count));
  for (int64_t w = 0; w < count; ++w) starts[w] = (w * available / count) * span;
  return starts;
}

namespace {

// [starts.size(), span] windows of `stream` as `dtype` (int64 tokens or float32 0/1 masks).
template <class T, class Out>
at::Tensor gather_windows(const std::vector<T>& stream, const std::vector<int64_t>& starts, int64_t span,
                          at::ScalarType dtype) {
  auto out = at::empty({static_cast<int64_t>(starts.size()), span}, at::TensorOptions().dtype(dtype));
  Out* o = out.data_ptr<Out>();
  for (size_t b = 0; b < starts.size(); ++b)
    for (int64_t t = 0; t < span; ++t) o[static_cast<int64_t>(b) * span + t] = static_cast<Out>(stream[starts[b] + t]);
  return out;
}

}  // namespace

at::Tensor TextDataset::train_batch(int64_t batch, int64_t context, uint64_t seed, int64_t step) const {
  return gather_windows<int32_t, int64_t>(train_, train_offsets(batch, context, seed, step), context + 1, at::kLong);
}

at::Tensor TextDataset::validation_windows(int64_t context, int64_t max_windows) const {
  return gather_windows<int32_t, int64_t>(validation_, validation_offsets(context, max_windows), context + 1,
                                          at::kLong);
}

at::Tensor TextDataset::train_batch_mask(int64_t batch, int64_t context, uint64_t seed, int64_t step) const {
  check(has_loss_mask(), "TextDataset::train_batch_mask: this dataset has no loss mask");
  return gather_windows<uint8_t, float>(train_mask_, train_offsets(batch, context, seed, step), context + 1,
                                        at::kFloat);
}

at::Tensor TextDataset::validation_window_masks(int64_t context, int64_t max_windows) const {
  check(has_loss_mask(), "TextDataset::validation_window_masks: this dataset has no loss mask");
  return gather_windows<uint8_t, float>(validation_mask_, validation_offsets(context, max_windows), context + 1,
                                        at::kFloat);
}

TextDataset split_sequences(const std::vector<MaskedSequence>& sequences, int64_t validation_every, bool masked,
                            const std::string& source) {
  check(validation_every >= 2, "validation_every: expected >= 2, got " + std::to_string(validation_every));
  if (static_cast<int64_t>(sequences.size()) < validation_every)
    throw Error::in_file(source, "sequences", "at least " + std::to_string(validation_every) + " for a validation split",
                         std::to_string(sequences.size()));
  std::vector<int32_t> train, validation;
  std::vector<uint8_t> train_mask, validation_mask;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const bool to_validation = static_cast<int64_t>(i % validation_every) == validation_every - 1;
    const MaskedSequence& s = sequences[i];
    check(s.mask.size() == s.tokens.size(), source + ": sequence " + std::to_string(i) + ": mask and tokens differ in length");
    (to_validation ? validation : train).insert((to_validation ? validation : train).end(), s.tokens.begin(), s.tokens.end());
    auto& m = to_validation ? validation_mask : train_mask;
    m.insert(m.end(), s.mask.begin(), s.mask.end());
  }
  if (!masked) {  // empty masks: a dataset without a loss mask
    train_mask.clear();
    validation_mask.clear();
  }
  return TextDataset(std::move(train), std::move(validation), std::move(train_mask), std::move(validation_mask),
                     static_cast<int64_t>(sequences.size()));
}

std::string TextDataset::fingerprint() const {
  // FNV-1a over both streams and masks, each prefixed by its length so boundaries count.
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](const void* data, size_t bytes) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  };
  auto add = [&](const auto& v) {
    const uint64_t n = v.size();
    mix(&n, sizeof n);
    if (!v.empty()) mix(v.data(), v.size() * sizeof(v[0]));
  };
  add(train_);
  add(validation_);
  add(train_mask_);
  add(validation_mask_);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace draftlab
