#include "core/training/text_dataset.h"

#include <algorithm>
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

Sampling parse_sampling(const std::string& name) {
  if (name == "windows") return Sampling::Windows;
  if (name == "whole") return Sampling::Whole;
  throw Error("--samples: expected whole or windows, got '" + name + "'");
}

const char* sampling_name(Sampling s) { return s == Sampling::Whole ? "whole" : "windows"; }

TextDataset::TextDataset(const std::string& corpus_path, const Tokenizer& tokenizer, int64_t validation_every) {
  check(validation_every >= 2, "validation_every: expected >= 2, got " + std::to_string(validation_every));
  check(tokenizer.bos_id() >= 0, corpus_path + ": the tokenizer has no BOS token to start each story with");
  const std::vector<std::string> stories = split_stories(read_text_file(corpus_path));
  if (static_cast<int64_t>(stories.size()) < validation_every)
    throw Error::in_file(corpus_path, "stories (blank-line separated)",
                         "at least " + std::to_string(validation_every) + " for a validation split",
                         std::to_string(stories.size()));
  for (size_t i = 0; i < stories.size(); ++i) {
    const bool to_validation = static_cast<int64_t>(i % validation_every) == validation_every - 1;
    std::vector<int32_t>& out = to_validation ? validation_ : train_;
    (to_validation ? validation_starts_ : train_starts_).push_back(static_cast<int64_t>(out.size()));
    const std::vector<int32_t> ids = tokenizer.encode(stories[i], /*add_bos=*/true);
    out.insert(out.end(), ids.begin(), ids.end());
  }
  stories_ = static_cast<int64_t>(stories.size());
}

TextDataset::TextDataset(std::vector<int32_t> train, std::vector<int32_t> validation)
    : train_(std::move(train)), validation_(std::move(validation)) {}

TextDataset::TextDataset(std::vector<int32_t> train, std::vector<int32_t> validation, std::vector<uint8_t> train_mask,
                         std::vector<uint8_t> validation_mask, int64_t sequences, std::vector<int64_t> train_starts,
                         std::vector<int64_t> validation_starts)
    : train_(std::move(train)),
      validation_(std::move(validation)),
      train_mask_(std::move(train_mask)),
      validation_mask_(std::move(validation_mask)),
      train_starts_(std::move(train_starts)),
      validation_starts_(std::move(validation_starts)),
      stories_(sequences),
      masked_(!train_mask_.empty() || !validation_mask_.empty()) {
  check(!masked_ || (train_mask_.size() == train_.size() && validation_mask_.size() == validation_.size()),
        "TextDataset: a loss mask must have one entry per token (training " + std::to_string(train_mask_.size()) +
            " for " + std::to_string(train_.size()) + " tokens, validation " +
            std::to_string(validation_mask_.size()) + " for " + std::to_string(validation_.size()) + ")");
  auto check_starts = [](const std::vector<int64_t>& starts, size_t tokens, const char* split) {
    for (size_t i = 0; i < starts.size(); ++i)
      check((i == 0 ? starts[i] == 0 : starts[i] > starts[i - 1]) && starts[i] < static_cast<int64_t>(tokens),
            std::string("TextDataset: the ") + split + " sequence starts must ascend from 0 inside the stream (start " +
                std::to_string(i) + " is " + std::to_string(starts[i]) + ", the stream has " +
                std::to_string(tokens) + " tokens)");
  };
  check_starts(train_starts_, train_.size(), "training");
  check_starts(validation_starts_, validation_.size(), "validation");
}

void TextDataset::set_sampling(Sampling s) {
  check(s == Sampling::Windows || (!train_starts_.empty() && !validation_starts_.empty()),
        "--samples whole: this dataset does not know where its sequences start (use --samples windows)");
  sampling_ = s;
}

void check_training_fraction(double fraction) {
  check(fraction > 0 && fraction <= 1, "--data-fraction: expected a number in (0, 1], got " + std::to_string(fraction));
}

void TextDataset::keep_training_fraction(double fraction) {
  check_training_fraction(fraction);
  const auto keep = static_cast<size_t>(std::llround(fraction * static_cast<double>(train_.size())));
  train_.resize(keep);
  if (masked_) train_mask_.resize(keep);
  // The last kept sequence may be cut; sequences starting past the end are gone.
  while (!train_starts_.empty() && train_starts_.back() >= static_cast<int64_t>(keep)) train_starts_.pop_back();
}

namespace {

// A generator per step: batches depend on (seed, step) only, so a resumed run draws the same ones.
std::mt19937_64 step_generator(uint64_t seed, int64_t step) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(step),
                    static_cast<uint32_t>(static_cast<uint64_t>(step) >> 32)};
  return std::mt19937_64(seq);
}

// The real tokens of sequence i of a stream (starts ascending), at most span.
int64_t sequence_length(const std::vector<int64_t>& starts, size_t i, size_t tokens, int64_t span) {
  const int64_t end = i + 1 < starts.size() ? starts[i + 1] : static_cast<int64_t>(tokens);
  return std::min(end - starts[i], span);
}

// [rows, span] of `stream` as `dtype` (int64 tokens or float32 0/1 masks); `fill` past each row's length.
template <class T, class Out>
at::Tensor gather_rows(const std::vector<T>& stream, const std::vector<int64_t>& starts,
                       const std::vector<int64_t>& lengths, int64_t span, at::ScalarType dtype, Out fill) {
  auto out = at::empty({static_cast<int64_t>(starts.size()), span}, at::TensorOptions().dtype(dtype));
  Out* o = out.data_ptr<Out>();
  for (size_t b = 0; b < starts.size(); ++b)
    for (int64_t t = 0; t < span; ++t)
      o[static_cast<int64_t>(b) * span + t] = t < lengths[b] ? static_cast<Out>(stream[starts[b] + t]) : fill;
  return out;
}

}  // namespace

TextDataset::Spans TextDataset::train_spans(int64_t batch, int64_t context, uint64_t seed, int64_t step) const {
  const int64_t n = train_tokens(), span = context + 1;
  std::mt19937_64 gen = step_generator(seed, step);
  Spans rows;
  if (sampling_ == Sampling::Whole) {
    check(!train_starts_.empty(), "--samples whole: the training split holds no sequence");
    const uint64_t count = train_starts_.size();
    for (int64_t b = 0; b < batch; ++b) {
      const size_t i = static_cast<size_t>(gen() % count);
      rows.starts.push_back(train_starts_[i]);
      rows.lengths.push_back(sequence_length(train_starts_, i, train_.size(), span));
    }
    return rows;
  }
  if (n < span)
    throw Error("--context: expected at most " + std::to_string(n - 1) + " (the training split has " +
                std::to_string(n) + " tokens), got " + std::to_string(context));
  const uint64_t offsets = static_cast<uint64_t>(n - span + 1);
  for (int64_t b = 0; b < batch; ++b) rows.starts.push_back(static_cast<int64_t>(gen() % offsets));
  rows.lengths.assign(static_cast<size_t>(batch), span);
  return rows;
}

TextDataset::Spans TextDataset::validation_spans(int64_t context, int64_t max_windows) const {
  const int64_t n = validation_tokens(), span = context + 1;
  Spans rows;
  if (sampling_ == Sampling::Whole) {
    const auto available = static_cast<int64_t>(validation_starts_.size());
    const int64_t count = std::min(available, max_windows);
    for (int64_t w = 0; w < count; ++w) {
      const auto i = static_cast<size_t>(w * available / count);
      rows.starts.push_back(validation_starts_[i]);
      rows.lengths.push_back(sequence_length(validation_starts_, i, validation_.size(), span));
    }
    return rows;
  }
  const int64_t available = n / span;
  if (available == 0)
    throw Error("--context: expected at most " + std::to_string(n - 1) + " (the validation split has " +
                std::to_string(n) + " tokens), got " + std::to_string(context));
  const int64_t count = std::min(available, max_windows);
  for (int64_t w = 0; w < count; ++w) rows.starts.push_back((w * available / count) * span);
  rows.lengths.assign(static_cast<size_t>(count), span);
  return rows;
}

RowBatch TextDataset::gather(const std::vector<int32_t>& stream, const std::vector<uint8_t>& mask,
                             const Spans& spans, int64_t span) const {
  RowBatch out;
  out.tokens = gather_rows<int32_t, int64_t>(stream, spans.starts, spans.lengths, span, at::kLong, 0);
  if (masked_) {
    out.mask = gather_rows<uint8_t, float>(mask, spans.starts, spans.lengths, span, at::kFloat, 0.0f);
  } else if (has_loss_mask()) {  // unmasked data sampled Whole: every real token counts
    out.mask = at::zeros({static_cast<int64_t>(spans.starts.size()), span}, at::kFloat);
    for (size_t b = 0; b < spans.lengths.size(); ++b)
      out.mask[static_cast<int64_t>(b)].narrow(0, 0, spans.lengths[b]).fill_(1);
  }
  out.lengths = at::tensor(spans.lengths, at::kLong);
  return out;
}

RowBatch TextDataset::train_rows(int64_t batch, int64_t context, uint64_t seed, int64_t step) const {
  return gather(train_, train_mask_, train_spans(batch, context, seed, step), context + 1);
}

RowBatch TextDataset::validation_rows(int64_t context, int64_t max_windows) const {
  return gather(validation_, validation_mask_, validation_spans(context, max_windows), context + 1);
}

at::Tensor TextDataset::train_batch(int64_t batch, int64_t context, uint64_t seed, int64_t step) const {
  const Spans spans = train_spans(batch, context, seed, step);
  return gather_rows<int32_t, int64_t>(train_, spans.starts, spans.lengths, context + 1, at::kLong, 0);
}

at::Tensor TextDataset::validation_windows(int64_t context, int64_t max_windows) const {
  const Spans spans = validation_spans(context, max_windows);
  return gather_rows<int32_t, int64_t>(validation_, spans.starts, spans.lengths, context + 1, at::kLong, 0);
}

double TextDataset::padding_share(int64_t context) const {
  if (sampling_ != Sampling::Whole || train_starts_.empty()) return 0;
  const int64_t span = context + 1;
  double real = 0;
  for (size_t i = 0; i < train_starts_.size(); ++i)
    real += static_cast<double>(sequence_length(train_starts_, i, train_.size(), span));
  return 1 - real / (static_cast<double>(train_starts_.size()) * static_cast<double>(span));
}

TextDataset split_sequences(const std::vector<MaskedSequence>& sequences, int64_t validation_every, bool masked,
                            const std::string& source) {
  check(validation_every >= 2, "validation_every: expected >= 2, got " + std::to_string(validation_every));
  if (static_cast<int64_t>(sequences.size()) < validation_every)
    throw Error::in_file(source, "sequences", "at least " + std::to_string(validation_every) + " for a validation split",
                         std::to_string(sequences.size()));
  std::vector<int32_t> train, validation;
  std::vector<uint8_t> train_mask, validation_mask;
  std::vector<int64_t> train_starts, validation_starts;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const bool to_validation = static_cast<int64_t>(i % validation_every) == validation_every - 1;
    const MaskedSequence& s = sequences[i];
    check(s.mask.size() == s.tokens.size(), source + ": sequence " + std::to_string(i) + ": mask and tokens differ in length");
    if (s.tokens.empty()) continue;
    std::vector<int32_t>& stream = to_validation ? validation : train;
    (to_validation ? validation_starts : train_starts).push_back(static_cast<int64_t>(stream.size()));
    stream.insert(stream.end(), s.tokens.begin(), s.tokens.end());
    auto& m = to_validation ? validation_mask : train_mask;
    m.insert(m.end(), s.mask.begin(), s.mask.end());
  }
  if (!masked) {  // empty masks: a dataset without a loss mask
    train_mask.clear();
    validation_mask.clear();
  }
  return TextDataset(std::move(train), std::move(validation), std::move(train_mask), std::move(validation_mask),
                     static_cast<int64_t>(sequences.size()), std::move(train_starts), std::move(validation_starts));
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
  // Windows-sampled data hashes as it did before sampling existed, so older feature caches stay valid.
  if (sampling_ == Sampling::Whole) {
    add(std::string(sampling_name(sampling_)));
    add(train_starts_);
    add(validation_starts_);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::vector<int64_t> TextDataset::token_counts(int64_t vocab_size) const {
  std::vector<int64_t> counts(static_cast<size_t>(std::max<int64_t>(vocab_size, 0)), 0);
  for (const auto* stream : {&train_, &validation_})
    for (int32_t t : *stream)
      if (t >= 0 && t < vocab_size) ++counts[static_cast<size_t>(t)];
  return counts;
}

}  // namespace draftlab
