// llama2.c tokenizer.bin against the outputs of llama2.c's own run.c (../shared/golden/llama2c).
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/text/tokenizer.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using testing::shared_path;

const char kTok512[] = "models/aidreams260K/tok512.bin";

struct GoldenRun {
  std::vector<int32_t> prompt;     // run.c's encoding of the prompt, BOS first
  std::vector<int32_t> generated;  // greedy continuation
  std::string printed;             // everything run.c wrote to stdout
};

std::vector<int32_t> parse_ids_line(const std::string& text, const std::string& label) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (first != label) continue;
    std::vector<int32_t> ids;
    for (int32_t id; words >> id;) ids.push_back(id);
    return ids;
  }
  ADD_FAILURE() << "no line '" << label << "'";
  return {};
}

GoldenRun load_golden(const std::string& name) {
  const std::string ids = read_text_file(shared_path("golden/llama2c/" + name + ".ids.txt"));
  return {parse_ids_line(ids, "prompt"), parse_ids_line(ids, "generated"),
          read_text_file(shared_path("golden/llama2c/" + name + ".text.txt"))};
}

// What run.c's generate() prints for a token sequence: decode(prev, next) of every token after the first,
// through safe_printf (which drops single-byte pieces that are neither printable nor whitespace), then "\n".
std::string run_c_output(const Tokenizer& tok, const std::vector<int32_t>& sequence) {
  std::string out;
  for (size_t i = 1; i < sequence.size(); ++i) {
    const std::string piece = tok.token_bytes(sequence[i - 1], sequence[i]);
    if (piece.size() == 1 && !(std::isprint(static_cast<unsigned char>(piece[0])) ||
                               std::isspace(static_cast<unsigned char>(piece[0]))))
      continue;
    out += piece;
  }
  return out + "\n";
}

struct PromptCase {
  const char* golden;
  const char* prompt;  // as given to run.c (see ../shared/README.md)
};
const PromptCase kPromptCases[] = {
    {"aidreams260K.once-upon-a-time", "once upon a time"},
    {"aidreams260K.bos", ""},
    {"aidreams260K.neural-network", "the neural network dreams of"},
};

TEST(Llama2cTokenizer, EncodesPromptsLikeRunC) {
  DRAFTLAB_REQUIRE_SHARED(kTok512);
  DRAFTLAB_REQUIRE_SHARED("golden/llama2c");
  const auto tok = load_llama2c_tokenizer(shared_path(kTok512));
  for (const PromptCase& c : kPromptCases)
    EXPECT_EQ(tok->encode(c.prompt, /*add_bos=*/true), load_golden(c.golden).prompt) << c.golden;
}

TEST(Llama2cTokenizer, DecodesGenerationsLikeRunC) {
  DRAFTLAB_REQUIRE_SHARED(kTok512);
  DRAFTLAB_REQUIRE_SHARED("golden/llama2c");
  const auto tok = load_llama2c_tokenizer(shared_path(kTok512), 512);
  // stories260K has no tokenizer of its own; its golden run was printed through aidreams' tok512.
  for (const char* name : {"aidreams260K.once-upon-a-time", "aidreams260K.bos", "aidreams260K.neural-network",
                           "stories260K.bos-300"}) {
    const GoldenRun run = load_golden(name);
    std::vector<int32_t> sequence = run.prompt;
    sequence.insert(sequence.end(), run.generated.begin(), run.generated.end());
    EXPECT_EQ(run_c_output(*tok, sequence), run.printed) << name;
  }
}

TEST(Llama2cTokenizer, DecodeDropsSpaceAfterBosAndControlTokens) {
  DRAFTLAB_REQUIRE_SHARED(kTok512);
  const auto tok = load_llama2c_tokenizer(shared_path(kTok512));
  ASSERT_EQ(tok->bos_id(), 1);
  ASSERT_EQ(tok->eos_id(), 2);
  const std::vector<int32_t> ids = tok->encode("once upon a time", true);
  EXPECT_EQ(tok->decode(ids), "once upon a time");
  std::vector<int32_t> without_bos(ids.begin() + 1, ids.end());
  EXPECT_EQ(tok->decode(without_bos), " once upon a time");  // the dummy prefix stays when no BOS precedes it
  EXPECT_EQ(tok->token_bytes(-1, tok->bos_id()), "");
  EXPECT_EQ(tok->token_bytes(-1, tok->eos_id()), "");
}

TEST(Llama2cTokenizer, ByteFallbackRoundTrips) {
  DRAFTLAB_REQUIRE_SHARED(kTok512);
  const auto tok = load_llama2c_tokenizer(shared_path(kTok512));
  // Characters outside the 512-token vocabulary become <0xXX> byte tokens and decode back to the same bytes.
  const std::string text = "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\xA6\x99 \x01";
  EXPECT_EQ(tok->decode(tok->encode(text, true)), text);
}

TEST(Llama2cTokenizer, LlamaTwoExportLoads) {
  DRAFTLAB_REQUIRE_SHARED("models/llama2-tokenizer/tokenizer.bin");
  const auto tok = load_llama2c_tokenizer(shared_path("models/llama2-tokenizer/tokenizer.bin"));
  EXPECT_EQ(tok->vocab_size(), 32000);
  const std::string text = "Hello, world! \xC3\xA9t\xC3\xA9 \xF0\x9F\xA6\x99";
  EXPECT_EQ(tok->decode(tok->encode(text, true)), text);
}

// ---- malformed files --------------------------------------------------------------------------------------------

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = testing::temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

template <typename T>
void put(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

TEST(Llama2cTokenizer, VocabSizeArgumentMustMatchTheFile) {
  DRAFTLAB_REQUIRE_SHARED(kTok512);
  EXPECT_EQ(load_llama2c_tokenizer(shared_path(kTok512), 512)->vocab_size(), 512);
  EXPECT_THROW(load_llama2c_tokenizer(shared_path(kTok512), 511), Error);  // entries left over
  EXPECT_THROW(load_llama2c_tokenizer(shared_path(kTok512), 513), Error);  // file too short
  EXPECT_THROW(load_llama2c_tokenizer(shared_path(kTok512), 1 << 30), Error);
  EXPECT_THROW(load_llama2c_tokenizer(shared_path(kTok512), 0), Error);
}

TEST(Llama2cTokenizer, EveryTruncationThrowsError) {
  DRAFTLAB_REQUIRE_SHARED(kTok512);
  const std::string full = read_text_file(shared_path(kTok512));
  for (size_t n = 0; n < full.size(); n += (n < 64 ? 1 : 97)) {
    const std::string path = write_temp("cut.bin", full.substr(0, n));
    // With the model's vocab_size every prefix is short; reading to the end only accepts whole entries.
    EXPECT_THROW(load_llama2c_tokenizer(path, 512), Error) << n;
    try {
      load_llama2c_tokenizer(path);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

TEST(Llama2cTokenizer, LyingLengthsThrowError) {
  std::string negative;
  put<int32_t>(&negative, 8);
  put<float>(&negative, 0.0f);
  put<int32_t>(&negative, -5);
  EXPECT_THROW(load_llama2c_tokenizer(write_temp("negative.bin", negative)), Error);

  std::string too_long;
  put<int32_t>(&too_long, 2);
  put<float>(&too_long, 0.0f);
  put<int32_t>(&too_long, 3);
  too_long += "abc";
  EXPECT_THROW(load_llama2c_tokenizer(write_temp("too_long.bin", too_long)), Error);

  std::string huge;
  put<int32_t>(&huge, 1 << 30);
  put<float>(&huge, 0.0f);
  put<int32_t>(&huge, 1 << 30);
  EXPECT_THROW(load_llama2c_tokenizer(write_temp("huge.bin", huge)), Error);

  std::string bad_max;
  put<int32_t>(&bad_max, -1);
  EXPECT_THROW(load_llama2c_tokenizer(write_temp("bad_max.bin", bad_max)), Error);
}

TEST(Llama2cTokenizer, TinyVocabularyWithoutByteTokensRejectsUnknownText) {
  std::string tiny;
  put<int32_t>(&tiny, 6);  // the longest piece, "\n</s>\n"
  for (const char* piece : {"<unk>", "\n<s>\n", "\n</s>\n", " ", "a"}) {
    put<float>(&tiny, 0.0f);
    put<int32_t>(&tiny, static_cast<int32_t>(std::strlen(piece)));
    tiny += piece;
  }
  const auto tok = load_llama2c_tokenizer(write_temp("tiny.bin", tiny));
  EXPECT_EQ(tok->encode("a", true), (std::vector<int32_t>{1, 3, 4}));
  EXPECT_THROW(tok->encode("b", true), Error);  // would need byte token 3 + 'b', beyond the vocabulary
}

}  // namespace
}  // namespace draftlab
