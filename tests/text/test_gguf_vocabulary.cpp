// Tokenizers exported as GGUF vocabularies (core/text/gguf_vocabulary.h) and read back by load_gguf_tokenizer:
// the same ids for the same text, the same text for the same ids, for the byte-level BPE of the committed models
// (tokenizer.json), llama2.c's tokenizer.bin and SentencePiece's tokenizer.model; and llama.cpp's own test vectors
// still hold after the round trip. Unrepresentable tokenizers are refused with an Error naming their file.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/gguf.h"
#include "core/io/gguf_writer.h"
#include "core/text/gguf_vocabulary.h"
#include "core/text/tokenizer.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using testing::shared_path;
using testing::source_path;

// Writes the tokenizer's GGUF vocabulary to a vocabulary-only file and loads it back.
std::unique_ptr<Tokenizer> round_trip(const Tokenizer& original, const std::string& name, GgufVocabulary* out = nullptr) {
  const GgufVocabulary vocab = original.gguf_vocabulary();
  if (out) *out = vocab;
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  vocab.write_to(w);
  const std::string path = testing::temp_dir() + "/" + name + ".gguf";
  w.write(path);
  return load_gguf_tokenizer(path);
}

const std::vector<std::string>& sentences() {
  static const std::vector<std::string> s = {
      "once upon a time, there was a little dog named max.",
      "Lily and her mom went to the park. \"Look!\" she said; they'd seen 3 birds, 42 ducks... and 1000 ants!",
      "  leading spaces,\ttabs\tand\nnew lines\n\n  and trailing spaces   ",
      "caf\xC3\xA9 na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\xA6\x99 (llama) <s> </s> it's I'LL",
      "",
      " ",
  };
  return s;
}

void expect_same_tokenizer(const Tokenizer& a, const Tokenizer& b) {
  ASSERT_EQ(a.vocab_size(), b.vocab_size());
  EXPECT_EQ(a.bos_id(), b.bos_id());
  EXPECT_EQ(a.eos_id(), b.eos_id());
  for (const std::string& text : sentences()) {
    for (bool bos : {true, false}) {
      const std::vector<int32_t> ids = a.encode(text, bos);
      EXPECT_EQ(b.encode(text, bos), ids) << "\"" << text << "\" bos=" << bos;
      EXPECT_EQ(b.decode(ids), a.decode(ids)) << "\"" << text << "\"";
    }
  }
}

TEST(GgufVocabulary, ByteLevelBpeOfTheCommittedModelsRoundTrips) {
  for (const char* model : {"data/models/ts-tiny", "data/models/ts-target"}) {
    SCOPED_TRACE(model);
    const auto original = load_tokenizer(source_path(model));
    GgufVocabulary vocab;
    const auto exported = round_trip(*original, "bpe", &vocab);
    EXPECT_EQ(vocab.model, "gpt2");
    EXPECT_EQ(vocab.pre, "gpt-2");
    EXPECT_EQ(vocab.token_types.at(0), 3);  // <s>: control
    EXPECT_EQ(vocab.token_types.at(1), 3);  // </s>
    EXPECT_EQ(vocab.token_types.at(300), 1);
    EXPECT_FALSE(vocab.merges.empty());
    expect_same_tokenizer(*original, *exported);
    for (int32_t id = 0; id < original->vocab_size(); ++id) ASSERT_EQ(exported->piece(id), original->piece(id)) << id;
  }
}

TEST(GgufVocabulary, Llama2cTokenizerBinBecomesALlamaVocabulary) {
  DRAFTLAB_REQUIRE_SHARED("models/aidreams260K/tok512.bin");
  const auto original = load_tokenizer(shared_path("models/aidreams260K/tok512.bin"));
  GgufVocabulary vocab;
  const auto exported = round_trip(*original, "llama2c", &vocab);
  EXPECT_EQ(vocab.model, "llama");
  EXPECT_EQ(vocab.tokens.at(0), "<unk>");
  EXPECT_EQ(vocab.tokens.at(1), "<s>");
  EXPECT_EQ(vocab.tokens.at(2), "</s>");
  EXPECT_EQ(vocab.tokens.at(3), "<0x00>");
  EXPECT_EQ(vocab.token_types.at(3), 6);  // byte
  EXPECT_TRUE(vocab.add_space_prefix);
  for (const std::string& t : vocab.tokens) EXPECT_EQ(t.find(' '), std::string::npos) << "'" << t << "'";
  expect_same_tokenizer(*original, *exported);
}

// llama.cpp's test vectors beside a vocabulary file (BASE.inp texts, BASE.out expected ids without BOS).
void expect_llama_cpp_vectors(const Tokenizer& tokenizer, const std::string& base) {
  const std::string inp = read_text_file(base + ".inp"), out = read_text_file(base + ".out");
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::istringstream lines(out);
  size_t checked = 0;
  for (size_t start = 0, end; (end = inp.find(separator, start)) != std::string::npos; start = end + separator.size()) {
    std::string line;
    ASSERT_TRUE(std::getline(lines, line));
    std::istringstream words(line);
    std::vector<int32_t> want;
    for (int32_t id; words >> id;) want.push_back(id);
    EXPECT_EQ(tokenizer.encode(inp.substr(start, end - start), false), want) << inp.substr(start, end - start);
    ++checked;
  }
  EXPECT_GT(checked, 10u);
}

TEST(GgufVocabulary, SentencePieceModelRoundTripsAndKeepsLlamaCppVectors) {
  DRAFTLAB_REQUIRE_SHARED("models/llama2-tokenizer/tokenizer.model");
  DRAFTLAB_REQUIRE_SHARED("tokenizer-tests/ggml-vocab-llama-spm.gguf.inp");
  const auto original = load_tokenizer(shared_path("models/llama2-tokenizer/tokenizer.model"));
  const auto exported = round_trip(*original, "spm");
  expect_same_tokenizer(*original, *exported);
  // llama.cpp's expected ids (no BOS) for its test texts.
  const std::string base = shared_path("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  expect_llama_cpp_vectors(*exported, base);
}

TEST(GgufVocabulary, Gpt2PeerVocabularyKeepsLlamaCppVectors) {
  DRAFTLAB_REQUIRE_SHARED("tokenizer-tests/ggml-vocab-gpt-2.gguf");
  const std::string base = shared_path("tokenizer-tests/ggml-vocab-gpt-2.gguf");
  const auto original = load_tokenizer(base);
  GgufVocabulary vocab;
  const auto exported = round_trip(*original, "gpt2", &vocab);
  EXPECT_EQ(vocab.pre, "gpt-2");
  expect_llama_cpp_vectors(*exported, base);
}

TEST(GgufVocabulary, PaddingAddsUnusedTokens) {
  const auto original = load_tokenizer(source_path("data/models/ts-tiny"));
  GgufVocabulary vocab = original->gguf_vocabulary();
  const size_t n = vocab.tokens.size();
  vocab.pad_to(static_cast<int64_t>(n) + 3);
  ASSERT_EQ(vocab.tokens.size(), n + 3);
  EXPECT_EQ(vocab.tokens[n], "[PAD" + std::to_string(n) + "]");
  EXPECT_EQ(vocab.token_types[n + 2], 5);
  EXPECT_THROW(vocab.pad_to(10), Error);
}

TEST(GgufVocabulary, MetaspaceTokenizerJsonIsRefusedNamingItsFile) {
  const std::string dir = testing::temp_dir() + "/metaspace";
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/tokenizer.json") << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2,
      "\u2581": 3}, "merges": ["a b"]}, "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
      "prepend_scheme": "always"}})";
  const auto tok = load_tokenizer(dir + "/tokenizer.json");
  try {
    tok->gguf_vocabulary();
    FAIL() << "a Metaspace tokenizer.json was exported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/tokenizer.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("pre_tokenizer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace draftlab
