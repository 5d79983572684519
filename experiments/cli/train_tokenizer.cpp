// draftlab train-tokenizer: train a byte-level BPE vocabulary on a text corpus and write it as a Hugging Face
// tokenizer folder (tokenizer.json + tokenizer_config.json), which `generate --tokenizer DIR` and Hugging Face
// `tokenizers` both read.
#include <boost/program_options.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/text/bpe_trainer.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/model_loading.h"

namespace po = boost::program_options;

namespace draftlab::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The first max_bytes bytes of text (all of it for 0), cut back to the start of a UTF-8 character so that no
// character is split.
std::string_view prefix_of(std::string_view text, uint64_t max_bytes) {
  if (max_bytes == 0 || max_bytes >= text.size()) return text;
  size_t end = static_cast<size_t>(max_bytes);
  while (end > 0 && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) --end;  // a continuation byte
  return text.substr(0, end);
}

// Creates DIR (and its parents) and checks that files can be written in it, before any time is spent training.
void prepare_out_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !is_directory(dir)) {
    throw Error("--out " + dir + ": expected a folder that exists or can be created, got " +
                (ec ? "\"" + ec.message() + "\" creating it" : "a path that is not a folder"));
  }
  if (::access(dir.c_str(), W_OK) != 0) throw Error("--out " + dir + ": expected a writable folder, got no write permission");
}

// "merges 1200/7934 (15%), 2400/s, ETA 3 s" on one rewritten stderr line, a few times a second.
class ProgressLine {
 public:
  void update(int done, int wanted) {
    if (done == 1) start_ = Clock::now();  // the rate counts merges only, not the pre-tokenization before them
    const double elapsed = seconds_since(start_);
    if (elapsed - last_print_ < 0.2) return;
    last_print_ = elapsed;
    print(done, wanted, elapsed);
  }
  // The final count (training may stop short of `wanted`), and the end of the line.
  void finish(int done, int wanted) {
    const double elapsed = seconds_since(start_);
    std::fprintf(stderr, "\r  merges %d/%d, %.0f/s, done                 \n", done, wanted, elapsed > 0 ? done / elapsed : 0);
  }

 private:
  static void print(int done, int wanted, double elapsed) {
    const double rate = elapsed > 0 ? done / elapsed : 0;
    const double eta = rate > 0 ? (wanted - done) / rate : 0;
    std::fprintf(stderr, "\r  merges %d/%d (%d%%), %.0f/s, ETA %.0f s   ", done, wanted,
                 wanted > 0 ? static_cast<int>(100.0 * done / wanted) : 100, rate, eta);
    std::fflush(stderr);
  }

  Clock::time_point start_ = Clock::now();
  double last_print_ = 0;
};

}  // namespace

int run_train_tokenizer(int argc, char** argv) {
  std::string corpus_path, out_dir;
  BpeTrainerOptions options;
  std::vector<std::string> specials;
  uint64_t max_bytes = 0;

  po::options_description desc(
      "draftlab train-tokenizer: train a byte-level BPE vocabulary (GPT-2 style) on a text corpus and write\n"
      "OUT/tokenizer.json and OUT/tokenizer_config.json (ids: special tokens, 256 bytes, merges)\n\noptions");
  desc.add_options()
      ("help,h", "show this help")
      ("corpus", po::value(&corpus_path)->required(), "text file to train on (UTF-8; any bytes are encodable)")
      ("vocab-size", po::value(&options.vocab_size)->required(),
       "entries in the vocabulary: special tokens + 256 bytes + merges (e.g. 512, 1024, 4096, 8192)")
      ("out", po::value(&out_dir)->required(), "output folder (created if missing)")
      ("special", po::value(&specials)->composing(),
       "special token, repeatable, in id order (default: <s> </s>; the first is BOS, the second EOS)")
      ("min-frequency", po::value(&options.min_frequency)->default_value(options.min_frequency),
       "pairs seen fewer times are never merged (training may stop short of --vocab-size)")
      ("max-bytes", po::value(&max_bytes)->default_value(0), "train on the first N bytes of the corpus (0 = all)");

  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "train-tokenizer", vm)) return 0;
  if (!specials.empty()) options.special_tokens = specials;
  const int minimum = 256 + static_cast<int>(options.special_tokens.size());
  if (options.vocab_size < minimum) {
    throw Error("--vocab-size: expected at least 256 byte symbols + " + std::to_string(options.special_tokens.size()) +
                " special tokens = " + std::to_string(minimum) + ", got " + std::to_string(options.vocab_size));
  }
  if (!is_file(corpus_path)) throw Error("--corpus " + corpus_path + ": no such file");
  prepare_out_dir(out_dir);

  const Clock::time_point start = Clock::now();
  const FileBytes corpus(corpus_path);
  const std::string_view all(reinterpret_cast<const char*>(corpus.data()), corpus.size());
  const std::string_view text = prefix_of(all, max_bytes);
  if (text.empty()) throw Error::at(corpus_path, "the corpus is empty (--corpus)");

  // A progress line only for a person watching: logs and pipes stay clean.
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  ProgressLine progress;
  BpeProgress on_merge;
  if (terminal) {
    std::fprintf(stderr, "  pre-tokenizing %.1f MB ...", text.size() / 1e6);
    std::fflush(stderr);
    on_merge = [&](int done, int wanted) { progress.update(done, wanted); };
  }
  const BpeVocabulary vocab = train_bpe(text, options, on_merge);
  if (terminal) progress.finish(static_cast<int>(vocab.merges.size()), options.vocab_size - minimum);
  save_bpe_tokenizer(vocab, out_dir);

  const double seconds = seconds_since(start);
  if (vocab.size() < options.vocab_size) {
    std::cerr << "warning: stopped at " << vocab.size() << " of the " << options.vocab_size
              << " tokens asked: no pair of symbols occurs at least " << options.min_frequency
              << " times (--min-frequency) in " << corpus_path << "\n";
  }
  std::printf("%s/tokenizer.json: %d tokens (%zu special + 256 bytes + %zu merges) from %.1f MB of %s in %.1f s\n",
              out_dir.c_str(), vocab.size(), vocab.special_tokens.size(), vocab.merges.size(), text.size() / 1e6,
              corpus_path.c_str(), seconds);
  return 0;
}

}  // namespace draftlab::cli
