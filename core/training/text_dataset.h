// TextDataset - a tokenized corpus for language-model training.
// The corpus is a text file of stories separated by blank lines. Each story becomes BOS + its tokens; every
// `validation_every`-th story (index % n == n - 1) goes to the validation split, the rest to training, so the
// split is the same on every run and machine. Training batches are random windows drawn from (seed, step) alone.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/text/tokenizer.h"

namespace draftlab {

class TextDataset {
 public:
  // Tokenizes the corpus once. Throws Error naming the file when it is missing, or has too few stories for
  // a validation split.
  TextDataset(const std::string& corpus_path, const Tokenizer& tokenizer, int64_t validation_every = 50);
  // Already tokenized streams (tests, synthetic data).
  TextDataset(std::vector<int32_t> train, std::vector<int32_t> validation);

  // [batch, context + 1] int64 windows at random offsets of the training stream, from a generator seeded by
  // (seed, step). Throws Error when the training stream is shorter than context + 1 tokens.
  at::Tensor train_batch(int64_t batch, int64_t context, uint64_t seed, int64_t step) const;

  // Up to max_windows non-overlapping [context + 1] windows spread evenly over the validation stream, as
  // [windows, context + 1] int64: the same every call, so validation losses of a run are comparable.
  at::Tensor validation_windows(int64_t context, int64_t max_windows) const;

  int64_t train_tokens() const { return static_cast<int64_t>(train_.size()); }
  int64_t validation_tokens() const { return static_cast<int64_t>(validation_.size()); }
  int64_t stories() const { return stories_; }

 private:
  std::vector<int32_t> train_, validation_;
  int64_t stories_ = 0;
};

// Splits text at blank lines (lines holding only whitespace), trimming each story; empty stories are dropped.
std::vector<std::string> split_stories(const std::string& text);

}  // namespace draftlab
