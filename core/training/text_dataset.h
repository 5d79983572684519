// TextDataset - a tokenized corpus for language-model training.
// The corpus is a text file of stories separated by blank lines. Each story becomes BOS + its tokens; every
// `validation_every`-th story (index % n == n - 1) goes to the validation split, the rest to training, so the
// split is the same on every run and machine. Training batches are random windows drawn from (seed, step) alone.
//
// A dataset may carry a loss mask parallel to its token streams (chat data: 1 on assistant-turn tokens, 0 on
// system/user/template text; target-generated data: 0 on the prompt). Windows and their masks are cut at the same
// offsets: train_rows(b, c, seed, step) holds the tokens of train_batch(b, c, seed, step) with their mask.
//
// Rows are cut one of two ways (Sampling; train-head --samples):
//   Windows  context + 1 tokens at a random offset of the concatenated stream. Cheap and dense, but a window
//            usually starts inside a sequence, so the target's features of its first tokens lack their left
//            context: not what a draft head sees at inference. train-lm's way, and train-head's before 2026-11-27.
//   Whole    one sequence (story, conversation, token line) per row, from its first token, cut at context + 1
//            tokens and right-padded with token 0. The target's features then see the whole left context, as at
//            inference and as the official EAGLE / Medusa trainers compute them. Padding is masked out, so such a
//            dataset always has a loss mask (1 on every real token of unmasked data); RowBatch::lengths gives each
//            row's real tokens. Rows are drawn uniformly among the sequences from (seed, step).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/text/masked_sequence.h"
#include "core/text/tokenizer.h"

namespace draftlab {

enum class Sampling { Windows, Whole };

// Rows of a dataset with what the losses need beside their tokens.
struct RowBatch {
  at::Tensor tokens;   // [rows, context + 1] int64
  at::Tensor mask;     // [rows, context + 1] float32 0/1, 0 on padding; undefined unless has_loss_mask()
  at::Tensor lengths;  // [rows] int64: real (unpadded) tokens per row, context + 1 unless sampled Whole
};
// "windows" or "whole"; throws Error naming --samples otherwise.
Sampling parse_sampling(const std::string& name);
const char* sampling_name(Sampling s);

class TextDataset {
 public:
  // Tokenizes the corpus once. Throws Error naming the file when it is missing, or has too few stories for
  // a validation split.
  TextDataset(const std::string& corpus_path, const Tokenizer& tokenizer, int64_t validation_every = 50);
  // Already tokenized streams (tests, synthetic data).
  TextDataset(std::vector<int32_t> train, std::vector<int32_t> validation);
  // Streams with their loss masks (one 0/1 byte per token; both empty: no loss mask), the number of sequences
  // they hold (for reports) and, for Sampling::Whole, where each sequence starts in its stream (ascending, the
  // first 0). Throws Error when a mask's length differs from its stream's or the starts are not such offsets.
  TextDataset(std::vector<int32_t> train, std::vector<int32_t> validation, std::vector<uint8_t> train_mask,
              std::vector<uint8_t> validation_mask, int64_t sequences, std::vector<int64_t> train_starts = {},
              std::vector<int64_t> validation_starts = {});

  // Windows by default. Whole needs the sequence starts (the corpus constructor and split_sequences record them):
  // throws Error otherwise.
  void set_sampling(Sampling s);
  Sampling sampling() const { return sampling_; }

  // [batch, context + 1] int64 rows (see Sampling) from a generator seeded by (seed, step). Windows: throws Error
  // when the training stream is shorter than context + 1 tokens.
  at::Tensor train_batch(int64_t batch, int64_t context, uint64_t seed, int64_t step) const;

  // Up to max_windows rows spread evenly over the validation split (Windows: non-overlapping windows of the
  // stream; Whole: sequences), as [windows, context + 1] int64: the same every call, so validation losses of a
  // run are comparable.
  at::Tensor validation_windows(int64_t context, int64_t max_windows) const;

  // The same rows with their loss masks and lengths. A mask only with has_loss_mask(): masked data, or any data
  // sampled Whole.
  bool has_loss_mask() const { return masked_ || sampling_ == Sampling::Whole; }
  RowBatch train_rows(int64_t batch, int64_t context, uint64_t seed, int64_t step) const;
  RowBatch validation_rows(int64_t context, int64_t max_windows) const;
  // The expected share of a training row that is padding (0 unless sampled Whole): short sequences in long rows
  // waste the target's and the head's compute (train-head warns).
  double padding_share(int64_t context) const;

  // Keeps the first round(fraction x tokens) tokens of the training stream (and its mask), 0 < fraction <= 1; the
  // validation split is untouched, so heads trained on different fractions are validated on the same windows.
  // Nested: a smaller fraction's tokens are a prefix of a larger one's (EAGLE-3 Figure 1's data scaling).
  // Throws check_training_fraction's Error when the fraction is out of range.
  void keep_training_fraction(double fraction);

  // A hash (16 hex digits) of the token streams and masks (and, sampled Whole, the sequence starts and the
  // sampling): names the data a feature cache was built from.
  std::string fingerprint() const;

  // How often each id in [0, vocab_size) occurs in both splits (ids outside are not counted).
  std::vector<int64_t> token_counts(int64_t vocab_size) const;

  int64_t train_tokens() const { return static_cast<int64_t>(train_.size()); }
  int64_t validation_tokens() const { return static_cast<int64_t>(validation_.size()); }
  int64_t stories() const { return stories_; }

 private:
  // Where each row starts in its stream and how many real tokens it holds.
  struct Spans {
    std::vector<int64_t> starts, lengths;
  };
  Spans train_spans(int64_t batch, int64_t context, uint64_t seed, int64_t step) const;
  Spans validation_spans(int64_t context, int64_t max_windows) const;
  // Tokens, mask (the stream's loss mask, or 1, on real tokens; 0 on padding) and lengths of the spans.
  RowBatch gather(const std::vector<int32_t>& stream, const std::vector<uint8_t>& mask, const Spans& spans,
                  int64_t span) const;

  std::vector<int32_t> train_, validation_;
  std::vector<uint8_t> train_mask_, validation_mask_;  // used only when masked_
  std::vector<int64_t> train_starts_, validation_starts_;  // sequence starts (empty: unknown)
  int64_t stories_ = 0;
  bool masked_ = false;
  Sampling sampling_ = Sampling::Windows;
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
