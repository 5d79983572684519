#include "core/training/text_dataset.h"

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

at::Tensor TextDataset::train_batch(int64_t batch, int64_t context, uint64_t seed, int64_t step) const {
  const int64_t n = train_tokens(), span = context + 1;
  if (n < span)
    throw Error("--context: expected at most " + std::to_string(n - 1) + " (the training split has " +
                std::to_string(n) + " tokens), got " + std::to_string(context));
  // A generator per step: batches depend on (seed, step) only, so a resumed run draws the same ones.
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(step),
                    static_cast<uint32_t>(static_cast<uint64_t>(step) >> 32)};
  std::mt19937_64 gen(seq);
  auto out = at::empty({batch, span}, at::TensorOptions().dtype(at::kLong));
  int64_t* o = out.data_ptr<int64_t>();
  const uint64_t offsets = static_cast<uint64_t>(n - span + 1);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t start = static_cast<int64_t>(gen() % offsets);
    for (int64_t t = 0; t < span; ++t) o[b * span + t] = train_[start + t];
  }
  return out;
}

at::Tensor TextDataset::validation_windows(int64_t context, int64_t max_windows) const {
  const int64_t n = validation_tokens(), span = context + 1;
  const int64_t available = n / span;
  if (available == 0)
    throw Error("--context: expected at most " + std::to_string(n - 1) + " (the validation split has " +
                std::to_string(n) + " tokens), got " + std::to_string(context));
  const int64_t count = std::min(available, max_windows);
  auto out = at::empty({count, span}, at::TensorOptions().dtype(at::kLong));
  int64_t* o = out.data_ptr<int64_t>();
  for (int64_t w = 0; w < count; ++w) {
    const int64_t start = (w * available / count) * span;
    for (int64_t t = 0; t < span; ++t) o[w * span + t] = validation_[start + t];
  }
  return out;
}

}  // namespace draftlab
