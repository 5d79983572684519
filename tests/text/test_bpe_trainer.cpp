// Byte-level BPE training (core/text/bpe_trainer.h): the merges on a corpus counted by hand, determinism, and
// that the saved tokenizer.json loads with load_hf_tokenizer_json and encodes/decodes text exactly.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/text/bpe_trainer.h"
#include "core/text/tokenizer.h"
#include "test_errors.h"
#include "test_paths.h"

namespace draftlab {
namespace {

constexpr const char* kTinyStories = "data/tinystories/tinystories.txt";

using Merges = std::vector<std::pair<std::string, std::string>>;

BpeTrainerOptions options_with(int vocab_size) {
  BpeTrainerOptions options;
  options.vocab_size = vocab_size;
  return options;
}

// A fresh folder under the test's scratch directory.
std::string fresh_dir(const std::string& name) {
  const std::string dir = testing::temp_dir() + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

// The first `bytes` bytes of the shared TinyStories corpus (cut at a line end, so no character is split).
std::string tinystories_slice(size_t bytes) {
  const std::string text = read_text_file(testing::shared_path(kTinyStories));
  const size_t end = text.rfind('\n', bytes);
  return text.substr(0, end == std::string::npos ? bytes : end + 1);
}

// Words after the GPT-2 split (Ġ = space): "hug" 1, "Ġhug" 2, "Ġpug" 1, "Ġpun" 1, "Ġbun" 1, "Ġhugs" 1.
//   pairs:   u g 5, h u 4, Ġ h 3, Ġ p 2, p u 2, u n 2, Ġ b 1, b u 1, g s 1       -> merge "u g"
//   then:    h ug 4, Ġ h 3, Ġ p 2, u n 2, p ug 1, p u 1, ug s 1, ...             -> merge "h ug"
//   then:    Ġ hug 3, Ġ p 2, u n 2, ...                                           -> merge "Ġ hug"
//   then:    Ġ p 2 and u n 2 tie; " " sorts before "u"                            -> merge "Ġ p", then "u n"
//   then every pair occurs once, below min_frequency 2: training stops short of the vocab_size asked.
TEST(BpeTrainer, FirstMergesAreTheHandCountedMostFrequentPairs) {
  const BpeVocabulary vocab = train_bpe("hug hug hug pug pun bun hugs", options_with(1000));
  const Merges expected = {{"u", "g"}, {"h", "ug"}, {"\xC4\xA0", "hug"}, {"\xC4\xA0", "p"}, {"u", "n"}};
  EXPECT_EQ(vocab.merges, expected);
  EXPECT_EQ(vocab.size(), 2 + 256 + 5);

  // With min_frequency 1 the pairs seen once merge too, up to the size asked.
  BpeTrainerOptions options = options_with(2 + 256 + 7);
  options.min_frequency = 1;
  const BpeVocabulary more = train_bpe("hug hug hug pug pun bun hugs", options);
  EXPECT_EQ(more.size(), 2 + 256 + 7);
  EXPECT_EQ(Merges(more.merges.begin(), more.merges.begin() + 5), expected);
}

TEST(BpeTrainer, IdsAreSpecialsThenBytesThenMerges) {
  const BpeVocabulary vocab = train_bpe("hug hug hug pug pun bun hugs", options_with(1000));
  const std::vector<std::string> pieces = vocab.pieces();
  ASSERT_EQ(static_cast<int>(pieces.size()), vocab.size());
  EXPECT_EQ(pieces[0], "<s>");
  EXPECT_EQ(pieces[1], "</s>");
  EXPECT_EQ(pieces[2 + 'a'], "a");
  EXPECT_EQ(pieces[2 + ' '], "\xC4\xA0");   // GPT-2's symbol for a space
  EXPECT_EQ(pieces[2 + '\n'], "\xC4\x8A");  // ... and for a newline
  EXPECT_EQ(pieces[2 + 256], "ug");
  EXPECT_EQ(pieces[2 + 256 + 2], "\xC4\xA0hug");

  const std::string dir = fresh_dir("hug");
  save_bpe_tokenizer(vocab, dir);
  const auto tok = load_hf_tokenizer_json(dir);
  EXPECT_EQ(tok->vocab_size(), vocab.size());
  EXPECT_EQ(tok->bos_id(), 0);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_EQ(tok->encode(" hug", false), std::vector<int32_t>{2 + 256 + 2});
  EXPECT_EQ(tok->encode("hugs", true), (std::vector<int32_t>{0, 2 + 256 + 1, 2 + 's'}));
  // Special tokens in the text are matched whole, as the trainer cut them out of its corpus.
  EXPECT_EQ(tok->encode("<s>hug</s>", false), (std::vector<int32_t>{0, 2 + 256 + 1, 1}));
}

TEST(BpeTrainer, TinyStoriesSliceHasTheSizeAskedIsDeterministicAndRoundTrips) {
  DRAFTLAB_REQUIRE_SHARED(kTinyStories);
  const std::string corpus = tinystories_slice(300 * 1024);
  const BpeVocabulary vocab = train_bpe(corpus, options_with(512));
  EXPECT_EQ(vocab.size(), 512);
  EXPECT_EQ(vocab.merges.size(), 512u - 2 - 256);

  // Same input and options: byte-identical files.
  const std::string json = bpe_tokenizer_json(vocab);
  EXPECT_EQ(bpe_tokenizer_json(train_bpe(corpus, options_with(512))), json);

  const std::string dir = fresh_dir("tinystories");
  save_bpe_tokenizer(vocab, dir);
  EXPECT_EQ(read_text_file(dir + "/tokenizer.json"), json);
  const auto tok = load_hf_tokenizer_json(dir + "/tokenizer.json");
  ASSERT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 0);
  EXPECT_EQ(tok->eos_id(), 1);

  const std::string text = tinystories_slice(200 * 1024);
  const std::vector<int32_t> ids = tok->encode(text, false);
  EXPECT_EQ(tok->decode(ids), text);
  // The merges are used: well under one token per byte (about 0.3 at this size).
  EXPECT_LT(ids.size(), text.size() / 2);

  // Text the corpus never had: every byte still has its symbol.
  const std::string foreign = "Grüße aus Köln! 日本語のテキスト, emoji 😀\ttab\r\n\x01\x7F and a stray byte \xFF.";
  EXPECT_EQ(tok->decode(tok->encode(foreign, true)), foreign);
}

TEST(BpeTrainer, NonAsciiCorpusRoundTrips) {
  std::string corpus;
  for (int i = 0; i < 20; ++i) corpus += "Grüße, Straße und Übermut. Ünïcödé wörds: ça, naïve, 東京と京都。\n\n";
  BpeTrainerOptions options = options_with(1000);
  options.special_tokens = {"<|endoftext|>"};
  const BpeVocabulary vocab = train_bpe(corpus, options);
  // Every word ends up a single piece long before 1000: training stops when no pair repeats.
  EXPECT_LT(vocab.size(), 1000);

  const std::string dir = fresh_dir("non-ascii");
  save_bpe_tokenizer(vocab, dir);
  const auto tok = load_hf_tokenizer_json(dir);
  EXPECT_EQ(tok->bos_id(), 0);
  EXPECT_EQ(tok->eos_id(), 0);  // one special token: it is both
  for (const std::string& text : {corpus, std::string("Übermut in Köln, 京都で. Straßen?")}) {
    const std::vector<int32_t> ids = tok->encode(text, false);
    EXPECT_EQ(tok->decode(ids), text);
  }
  // One piece per word: a line is 17 words ("Grüße" "," " Straße" ... " 東京と京都" "。" "\n" "\n"), except that the
  // final "\n\n" is one word, seen once, so never merged: two pieces.
  EXPECT_EQ(tok->encode(corpus, false).size(), 20u * 17);
}

TEST(BpeTrainer, BadOptionsThrowNamingTheOption) {
  using testing::expect_error;
  expect_error([] { train_bpe("some text", options_with(257)); }, {"vocab_size", "258", "257"});
  expect_error(
      [] {
        BpeTrainerOptions o = options_with(512);
        o.min_frequency = 0;
        train_bpe("some text", o);
      },
      {"min_frequency", "at least 1"});
  expect_error(
      [] {
        BpeTrainerOptions o = options_with(512);
        o.special_tokens = {"<s>", "<s>"};
        train_bpe("some text", o);
      },
      {"special token", "distinct", "<s>"});
  expect_error(
      [] {
        BpeTrainerOptions o = options_with(512);
        o.special_tokens = {""};
        train_bpe("some text", o);
      },
      {"special token", "non-empty"});
  expect_error(
      [] {
        BpeTrainerOptions o = options_with(512);
        o.special_tokens = {"a"};
        train_bpe("some text", o);
      },
      {"special token", "byte symbols", "\"a\""});
  expect_error(
      [] {
        BpeTrainerOptions o = options_with(512);
        o.special_tokens = {"\xFF"};
        train_bpe("some text", o);
      },
      {"special token", "UTF-8"});
  expect_error([] { train_bpe("", options_with(512)); }, {"corpus is empty"});
  expect_error([] { save_bpe_tokenizer(BpeVocabulary{}, "/nonexistent/dir"); }, {"/nonexistent/dir", "directory"});
}

}  // namespace
}  // namespace draftlab
