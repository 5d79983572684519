// TextDataset - a tokenized corpus for language-model training.
// The corpus is a text file of stories separated by blank lines. Each story becomes BOS + its tokens; every
// `validation_every`-th story (index % n == n - 1) goes to the validation split, the rest to training, so the
// split is the same on every run and machine. Training batches are random windows drawn from (seed, step) alone.
//
// A dataset may carry a loss mask parallel to its token streams (chat data: 1 on assistant-turn tokens, 0 on
// system/user/template text; target-generated data: 0 on the prompt). Windows and their masks are cut at the same
// offsets, so train_batch_mask(b, c, seed, step) is the mask of train_batch(b, c, seed, step) token for token.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/text/masked_sequence.h"
#include "core/text/tokenizer.h"

namespace draftlab {

class TextDataset {
 public:
  // Tokenizes the corpus once. Throws Error naming the file when it is missing, or has too few stories for
  // a validation split.
  TextDataset(const std::string& corpus_path, const Tokenizer& tokenizer, int64_t validation_every = 50);
  // Already tokenized streams (tests, synthetic data).
  TextDataset(std::vector<int32_t> train, std::vector<int32_t> validation);
  // Streams with their loss masks (one 0/1 byte per token; both empty: no loss mask) and the number of sequences
  // they hold (for reports). Throws Error when a mask's length differs from its stream's.
  TextDataset(std::vector<int32_t> train, std::vector<int32_t> validation, std::vector<uint8_t> train_mask,
              std::vector<uint8_t> validation_mask, int64_t sequences);

  // [batch, context + 1] int64 windows at random offsets of the training stream, from a generator seeded by
  // (seed, step). Throws Error when the training stream is shorter than context + 1 tokens.
  at::Tensor train_batch(int64_t batch, int64_t context, uint64_t seed, int64_t step) const;

  // Up to max_windows non-overlapping [context + 1] windows spread evenly over the validation stream, as
  // [windows, context + 1] int64: the same every call, so validation losses of a run are comparable.
  at::Tensor validation_windows(int64_t context, int64_t max_windows) const;

  // The loss masks of the windows above, [batch or windows, context + 1] float32 0/1. Only with has_loss_mask().
  bool has_loss_mask() const { return masked_; }
  at::Tensor train_batch_mask(int64_t batch, int64_t context, uint64_t seed, int64_t step) const;
  at::Tensor validation_window_masks(int64_t context, int64_t max_windows) const;

  // Keeps the first round(fraction x tokens) tokens of the training stream (and its mask), 0 < fraction <= 1; the
  // validation split is untouched, so heads trained on different fractions are validated on the same windows.
  // Nested: a smaller fraction's tokens are a prefix of a larger one's (EAGLE-3 Figure 1's data scaling).
  // Throws check_training_fraction's Error when the fraction is out of range.
  void keep_training_fraction(double fraction);

  // A hash (16 hex digits) of the token streams and masks: names the data a feature cache was built from.
  std::string fingerprint() const;

  int64_t train_tokens() const { return static_cast<int64_t>(train_.size()); }
  int64_t validation_tokens() const { return static_cast<int64_t>(validation_.size()); }
  int64_t stories() const { return stories_; }

 private:
  // Start offsets of the windows of train_batch / validation_windows.
  std::vector<int64_t> train_offsets(int64_t batch, int64_t context, uint64_t seed, int64_t step) const;
  std::vector<int64_t> validation_offsets(int64_t context, int64_t max_windows) const;

  std::vector<int32_t> train_, validation_;
  std::vector<uint8_t> train_mask_, validation_mask_;  // used only when masked_
  int64_t stories_ = 0;
  bool masked_ = false;
};

// Throws Error naming --data-fraction unless 0 < fraction <= 1 (train-head checks it before the target loads).
void check_training_fraction(double fraction);

// Concatenates sequences into a dataset with the corpus constructor's split (sequence i goes to validation when
// i % validation_every == validation_every - 1). masked = false drops the masks (plain data, no loss mask).
// Throws Error naming `source` when there are fewer than validation_every sequences.
TextDataset split_sequences(const std::vector<MaskedSequence>& sequences, int64_t validation_every, bool masked,
                            const std::string& source);

// Splits text at blank lines (lines holding only whitespace), trimming each story; empty stories are dropped.
std::vector<std::string> split_stories(const std::string& text);

}  // namespace draftlab
