// Byte-level BPE (GGUF "gpt2") and Hugging Face tokenizer.json BPE, checked against llama.cpp's tokenizer test
// vectors in ../shared/tokenizer-tests (expected ids produced by Hugging Face tokenizers).
//
// The tokenizer.json files are built here from the GGUF vocabularies: GPT-2 as its own tokenizer.json is laid out
// (ByteLevel), and Llama-2 the way Hugging Face's LlamaConverter derives merges from SentencePiece pieces
// (Prepend/Replace normalizer, byte fallback). Both must reproduce the peer vectors exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "test_errors.h"
#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/gguf.h"
#include "core/text/tokenizer.h"
#include "core/text/tokenizer_internal.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using nlohmann::json;

constexpr const char* kGpt2Gguf = "tokenizer-tests/ggml-vocab-gpt-2.gguf";
constexpr const char* kLlamaSpmGguf = "tokenizer-tests/ggml-vocab-llama-spm.gguf";

struct PeerCase {
  std::string text;
  std::vector<int32_t> ids;
};

// Reads <gguf>.inp / <gguf>.out exactly as llama.cpp's test-tokenizer-0 does: the whole .inp split on
// "\n__ggml_vocab_test__\n" (so a text may be empty or hold newlines), one line of ids per text in .out.
std::vector<PeerCase> read_peer_cases(const std::string& gguf_rel) {
  const std::string base = testing::shared_path(gguf_rel);
  const std::string raw = read_text_file(base + ".inp");
  std::ifstream out_file(base + ".out");
  std::vector<std::string> lines;
  for (std::string line; std::getline(out_file, line);) lines.push_back(line);

  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(separator, pos);
    if (next == std::string::npos) {
      texts.push_back(raw.substr(pos));
      break;
    }
    texts.push_back(raw.substr(pos, next - pos));
    pos = next + separator.size();
  }
  EXPECT_EQ(texts.size(), lines.size()) << base;

  std::vector<PeerCase> cases;
  for (size_t i = 0; i < std::min(texts.size(), lines.size()); ++i) {
    PeerCase c{texts[i], {}};
    std::istringstream ids(lines[i]);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string show(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else out += static_cast<char>(c);
  }
  return "\"" + out + "\"";
}

// Every peer case encodes to its expected ids; returns how many matched.
size_t expect_peer_cases(const Tokenizer& tok, const std::vector<PeerCase>& cases) {
  size_t matched = 0;
  for (const PeerCase& c : cases) {
    const std::vector<int32_t> got = tok.encode(c.text, /*add_bos=*/false);
    EXPECT_EQ(got, c.ids) << "text " << show(c.text);
    matched += got == c.ids;
  }
  return matched;
}

// Writes a tokenizer.json (and optionally a tokenizer_config.json) into a fresh folder; returns the json's path.
std::string write_tokenizer_dir(const std::string& name, const json& tokenizer, const json* config = nullptr) {
  const std::string dir = testing::temp_dir() + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  write_file_atomically(dir + "/tokenizer.json", tokenizer.dump());
  if (config) write_file_atomically(dir + "/tokenizer_config.json", config->dump());
  return dir + "/tokenizer.json";
}

json added_token(int64_t id, const std::string& content, bool special) {
  return {{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},   {"normalized", !special}, {"special", special}};
}

// GPT-2's vocabulary as Hugging Face's tokenizer.json for gpt2 lays it out: ByteLevel pre-tokenizer and decoder.
// Merges are written as [left, right] pairs (the newer format; the Llama-2 file below uses "left right").
json gpt2_tokenizer_json(const GgufFile& gguf) {
  const std::vector<std::string> tokens = gguf.get_string_array("tokenizer.ggml.tokens");
  const std::vector<int64_t> types = gguf.get_int_array("tokenizer.ggml.token_type");
  json vocab = json::object();
  json added = json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    vocab[tokens[id]] = id;
    if (types[id] == static_cast<int64_t>(PieceType::kControl)) added.push_back(added_token(id, tokens[id], true));
  }
  json merges = json::array();
  for (const std::string& merge : gguf.get_string_array("tokenizer.ggml.merges")) {
    const size_t space = merge.find(' ', 1);
    merges.push_back({merge.substr(0, space), merge.substr(space + 1)});
  }
  return {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
        {"merges", merges}}},
  };
}

size_t utf8_length(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// Hugging Face's LlamaConverter (transformers convert_slow_tokenizer.generate_merges): for every piece in id
// order, each split into two pieces that are both in the vocabulary (ordered by the halves' ids), then all merges
// stably sorted by the merged piece's score, the left half's length and the right half's length, descending.
std::vector<std::string> llama_converter_merges(const std::vector<std::string>& pieces,
                                                const std::vector<double>& scores) {
  std::unordered_map<std::string, size_t> ids;
  for (size_t id = 0; id < pieces.size(); ++id) ids[pieces[id]] = id;
  struct Merge {
    std::string left, right;
    double score;
    size_t left_chars, right_chars;
  };
  std::vector<Merge> merges;
  for (size_t id = 0; id < pieces.size(); ++id) {
    const std::string& piece = pieces[id];
    std::vector<Merge> local;
    for (size_t cut = 1; cut < piece.size(); ++cut) {
      if ((piece[cut] & 0xC0) == 0x80) continue;  // split between characters only
      const std::string left = piece.substr(0, cut), right = piece.substr(cut);
      if (ids.count(left) && ids.count(right)) {
        local.push_back({left, right, scores[id], utf8_length(left), utf8_length(right)});
      }
    }
    std::stable_sort(local.begin(), local.end(), [&](const Merge& a, const Merge& b) {
      return std::make_pair(ids[a.left], ids[a.right]) < std::make_pair(ids[b.left], ids[b.right]);
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return std::make_tuple(a.score, a.left_chars, a.right_chars) > std::make_tuple(b.score, b.left_chars, b.right_chars);
  });
  std::vector<std::string> out;
  out.reserve(merges.size());
  for (const Merge& m : merges) out.push_back(m.left + " " + m.right);
  return out;
}

const std::string kMetaspace = "\xE2\x96\x81";  // "▁"

// Llama-2's tokenizer.json as Hugging Face converts it from SentencePiece: the pieces as vocabulary, derived merges,
// the dummy prefix and spaces as a Prepend + Replace normalizer, byte fallback, and the matching decoder.
json llama2_tokenizer_json(const GgufFile& gguf) {
  const std::vector<std::string> pieces = gguf.get_string_array("tokenizer.ggml.tokens");
  const std::vector<double> scores = gguf.get_float_array("tokenizer.ggml.scores");
  const std::vector<int64_t> types = gguf.get_int_array("tokenizer.ggml.token_type");
  json vocab = json::object();
  json added = json::array();
  for (size_t id = 0; id < pieces.size(); ++id) {
    vocab[pieces[id]] = id;
    if (types[id] == static_cast<int64_t>(PieceType::kControl) || types[id] == static_cast<int64_t>(PieceType::kUnknown)) {
      added.push_back(added_token(id, pieces[id], true));
    }
  }
  const json replace_space = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}};
  return {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", kMetaspace}}, replace_space}}}},
      {"pre_tokenizer", nullptr},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", true}, {"byte_fallback", true}, {"vocab", vocab},
        {"merges", llama_converter_merges(pieces, scores)}}},
  };
}

// Loaded once per process: building the vocabularies is the slow part of these tests.
const Tokenizer& gguf_gpt2() {
  static const std::unique_ptr<Tokenizer> tok = make_gguf_bpe_tokenizer(read_gguf(testing::shared_path(kGpt2Gguf)));
  return *tok;
}
const std::string& gpt2_json_path() {
  static const std::string path =
      write_tokenizer_dir("gpt2", gpt2_tokenizer_json(read_gguf(testing::shared_path(kGpt2Gguf))));
  return path;
}
const json& llama2_json() {
  static const json j = llama2_tokenizer_json(read_gguf(testing::shared_path(kLlamaSpmGguf)));
  return j;
}
const Tokenizer& hf_llama2() {
  static const std::unique_ptr<Tokenizer> tok = load_hf_tokenizer_json(write_tokenizer_dir("llama2", llama2_json()));
  return *tok;
}

// ---------------------------------------------------------------------------------------------------------------
// GGUF "gpt2"

TEST(BpeGguf, Gpt2PeerVectors) {
  DRAFTLAB_REQUIRE_SHARED(kGpt2Gguf);
  const std::vector<PeerCase> cases = read_peer_cases(kGpt2Gguf);
  ASSERT_EQ(cases.size(), 46u);
  EXPECT_EQ(expect_peer_cases(gguf_gpt2(), cases), cases.size());
}

TEST(BpeGguf, Gpt2DecodeRoundTripsEveryPeerText) {
  DRAFTLAB_REQUIRE_SHARED(kGpt2Gguf);
  for (const PeerCase& c : read_peer_cases(kGpt2Gguf)) {
    EXPECT_EQ(gguf_gpt2().decode(gguf_gpt2().encode(c.text, false)), c.text);
  }
  // Bytes that are not UTF-8 survive too: byte-level BPE covers every byte.
  const std::string binary("\xff\xfe\x80 a\xc3", 6);
  EXPECT_EQ(gguf_gpt2().decode(gguf_gpt2().encode(binary, false)), binary);
}

TEST(BpeGguf, Gpt2SpecialTokens) {
  DRAFTLAB_REQUIRE_SHARED(kGpt2Gguf);
  const Tokenizer& tok = gguf_gpt2();
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.bos_id(), 50256);
  EXPECT_EQ(tok.eos_id(), 50256);
  EXPECT_EQ(tok.piece(50256), "<|endoftext|>");
  EXPECT_EQ(tok.token_bytes(-1, 50256), "");  // control tokens are not text
  // Pieces are stored as byte-level symbols; token_bytes gives the raw bytes.
  const std::vector<int32_t> space_hello = tok.encode(" Hello", false);
  ASSERT_EQ(space_hello.size(), 1u);
  EXPECT_EQ(tok.piece(space_hello[0]), "\xC4\xA0Hello");  // "ĠHello"
  EXPECT_EQ(tok.token_bytes(-1, space_hello[0]), " Hello");
  // A control token written in the text is matched verbatim; the text around it is encoded on its own.
  std::vector<int32_t> expected = tok.encode("Hello", false);
  expected.push_back(50256);
  for (int32_t id : tok.encode(" world", false)) expected.push_back(id);
  EXPECT_EQ(tok.encode("Hello<|endoftext|> world", false), expected);
  expected.insert(expected.begin(), 50256);
  EXPECT_EQ(tok.encode("Hello<|endoftext|> world", true), expected);
  EXPECT_THROW(tok.piece(50257), Error);
  EXPECT_THROW(tok.token_bytes(-1, -1), Error);
}

TEST(BpeGguf, RejectsOtherVocabularyModels) {
  DRAFTLAB_REQUIRE_SHARED(kLlamaSpmGguf);
  draftlab::testing::expect_error([] { make_gguf_bpe_tokenizer(read_gguf(testing::shared_path(kLlamaSpmGguf))); },
               {"ggml-vocab-llama-spm.gguf", "tokenizer.ggml.model", "gpt2", "llama"});
}

TEST(BpeGguf, EncodesLongPromptsQuickly) {
  DRAFTLAB_REQUIRE_SHARED(kGpt2Gguf);
  std::string text;
  for (const PeerCase& c : read_peer_cases(kGpt2Gguf)) text += c.text + "\n";
  while (text.size() < 64 * 1024) text += text;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = gguf_gpt2().encode(text, false);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(gguf_gpt2().decode(ids), text);
  // Generous bound (sanitizer builds are ~10x slower); a release build takes a few milliseconds.
  EXPECT_LT(seconds, 5.0) << text.size() << " bytes";
}

// ---------------------------------------------------------------------------------------------------------------
// Hugging Face tokenizer.json

TEST(HfTokenizerJson, Gpt2ByteLevelPeerVectors) {
  DRAFTLAB_REQUIRE_SHARED(kGpt2Gguf);
  const std::unique_ptr<Tokenizer> tok = load_hf_tokenizer_json(gpt2_json_path());
  const std::vector<PeerCase> cases = read_peer_cases(kGpt2Gguf);
  ASSERT_EQ(cases.size(), 46u);
  EXPECT_EQ(expect_peer_cases(*tok, cases), cases.size());
  for (const PeerCase& c : cases) EXPECT_EQ(tok->decode(tok->encode(c.text, false)), c.text);
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->bos_id(), 50256);  // <|endoftext|>, found by name
  EXPECT_EQ(tok->eos_id(), 50256);
  EXPECT_EQ(tok->token_bytes(-1, 50256), "");
}

TEST(HfTokenizerJson, AcceptsTheFolderHoldingTokenizerJson) {
  DRAFTLAB_REQUIRE_SHARED(kGpt2Gguf);
  const std::string path = gpt2_json_path();
  const std::unique_ptr<Tokenizer> tok = load_hf_tokenizer_json(path.substr(0, path.rfind('/')));
  EXPECT_EQ(tok->encode(" Hello world", false), gguf_gpt2().encode(" Hello world", false));
}

TEST(HfTokenizerJson, Llama2MetaspaceByteFallbackPeerVectors) {
  DRAFTLAB_REQUIRE_SHARED(kLlamaSpmGguf);
  const std::vector<PeerCase> cases = read_peer_cases(kLlamaSpmGguf);
  ASSERT_EQ(cases.size(), 46u);
  EXPECT_EQ(expect_peer_cases(hf_llama2(), cases), cases.size());
  EXPECT_EQ(hf_llama2().vocab_size(), 32000);
  EXPECT_EQ(hf_llama2().bos_id(), 1);
  EXPECT_EQ(hf_llama2().eos_id(), 2);
}

TEST(HfTokenizerJson, Llama2DecodeDropsTheDummyPrefixAfterBos) {
  DRAFTLAB_REQUIRE_SHARED(kLlamaSpmGguf);
  const Tokenizer& tok = hf_llama2();
  // With BOS, the "▁" the normalizer prepended is dropped again: decode gives back the text exactly, including
  // the characters that went through <0xXX> byte fallback (tabs, emoji, Khmer).
  for (const PeerCase& c : read_peer_cases(kLlamaSpmGguf)) EXPECT_EQ(tok.decode(tok.encode(c.text, true)), c.text);
  const std::vector<int32_t> hello = tok.encode("Hello", false);
  ASSERT_EQ(hello.size(), 1u);
  EXPECT_EQ(tok.piece(hello[0]), kMetaspace + "Hello");
  EXPECT_EQ(tok.token_bytes(-1, hello[0]), " Hello");
  EXPECT_EQ(tok.token_bytes(tok.bos_id(), hello[0]), "Hello");
  EXPECT_EQ(tok.token_bytes(-1, 3 + '\n'), "\n");  // "<0x0A>"
  EXPECT_EQ(tok.token_bytes(-1, tok.bos_id()), "");
}

TEST(HfTokenizerJson, MetaspacePreTokenizerMatchesSentencePiece) {
  DRAFTLAB_REQUIRE_SHARED(kLlamaSpmGguf);
  // The newer layout (Mistral, Llama-2 with legacy=false): no normalizer, a Metaspace pre-tokenizer that
  // prepends "▁" to the input's first segment. It adds no second "▁" before a leading space, unlike
  // SentencePiece, so the texts that start with a space are left out; every other text must match.
  json j = llama2_json();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kMetaspace}, {"prepend_scheme", "first"}, {"split", false}};
  const json metaspace_decoder = {{"type", "Metaspace"}, {"replacement", kMetaspace}, {"prepend_scheme", "first"}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", json::array({metaspace_decoder, {{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}};
  const std::unique_ptr<Tokenizer> tok = load_hf_tokenizer_json(write_tokenizer_dir("llama2-metaspace", j));
  size_t checked = 0;
  for (const PeerCase& c : read_peer_cases(kLlamaSpmGguf)) {
    if (!c.text.empty() && c.text[0] == ' ') continue;
    EXPECT_EQ(tok->encode(c.text, false), c.ids) << "text " << show(c.text);
    EXPECT_EQ(tok->decode(tok->encode(c.text, true)), c.text);
    ++checked;
  }
  EXPECT_GT(checked, 30u);
  // "first": after an added token in the middle of the text, no "▁" is prepended.
  std::vector<int32_t> expected = tok->encode("Hi", false);
  expected.push_back(2);
  const std::vector<int32_t> after = hf_llama2().encode("there", false);  // "▁there"
  const std::vector<int32_t> got = tok->encode("Hi</s>there", false);
  ASSERT_GT(got.size(), expected.size());
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), got.begin()));
  EXPECT_NE(std::vector<int32_t>(got.begin() + expected.size(), got.end()), after);
  // Metaspace decoding: "▁" is a space, dropped at the start after BOS; </s> is not text.
  EXPECT_EQ(tok->decode(tok->encode("Hi</s>there", true)), "Hithere");
}

TEST(HfTokenizerJson, SpecialTokenIdsFromTokenizerConfig) {
  DRAFTLAB_REQUIRE_SHARED(kGpt2Gguf);
  json j = gpt2_tokenizer_json(read_gguf(testing::shared_path(kGpt2Gguf)));
  j["added_tokens"].push_back(added_token(50257, "<|im_end|>", true));
  const json config = {{"bos_token", nullptr}, {"eos_token", {{"__type", "AddedToken"}, {"content", "<|im_end|>"}}}};
  const std::unique_ptr<Tokenizer> tok = load_hf_tokenizer_json(write_tokenizer_dir("gpt2-config", j, &config));
  EXPECT_EQ(tok->vocab_size(), 50258);  // the added token extends the id space
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_EQ(tok->eos_id(), 50257);
  EXPECT_EQ(tok->encode("a<|im_end|>", true), (std::vector<int32_t>{tok->encode("a", false)[0], 50257}));

  const json bad_config = {{"eos_token", "<|no_such_token|>"}};
  const std::string path = write_tokenizer_dir("gpt2-bad-config", j, &bad_config);
  draftlab::testing::expect_error([&] { load_hf_tokenizer_json(path); }, {"tokenizer_config.json", "eos_token", "<|no_such_token|>"});
}

// A small byte-level tokenizer.json for the error cases: the 256 byte symbols, plus "ab" = a + b.
json tiny_byte_level_json() {
  json vocab = json::object();
  // GPT-2's printable bytes stand for themselves; the rest map to U+0100 upwards.
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const int cp = printable ? b : next++;
    std::string symbol;
    if (cp < 0x80) {
      symbol = std::string(1, static_cast<char>(cp));
    } else {
      symbol = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
    vocab[symbol] = b;
  }
  vocab["ab"] = 256;
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
          {"decoder", {{"type", "ByteLevel"}}}};
}

TEST(HfTokenizerJson, TinyByteLevelVocabulary) {
  const std::unique_ptr<Tokenizer> tok = load_hf_tokenizer_json(write_tokenizer_dir("tiny", tiny_byte_level_json()));
  EXPECT_EQ(tok->encode("ab", false), (std::vector<int32_t>{256}));
  EXPECT_EQ(tok->encode("aab", false), (std::vector<int32_t>{'a', 256}));
  EXPECT_EQ(tok->decode(tok->encode("x ab\n", false)), "x ab\n");
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_EQ(tok->encode("ab", true), (std::vector<int32_t>{256}));  // no BOS to add
}

TEST(HfTokenizerJson, Llama3SplitAndIgnoreMerges) {
  // Llama-3's layout: a Split pre-tokenizer with its regex, then ByteLevel without the GPT-2 regex.
  const std::string llama3_regex =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  json j = tiny_byte_level_json();
  j["model"]["vocab"]["abc"] = 257;  // reachable only as a whole word: no merge builds it
  j["model"]["vocab"]["34"] = 258;
  j["model"]["merges"] = {"a b", "3 4"};
  const json split = {{"type", "Split"}, {"pattern", {{"Regex", llama3_regex}}}, {"behavior", "Isolated"}, {"invert", false}};
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({split, byte_level})}};
  j["model"]["ignore_merges"] = true;
  const std::unique_ptr<Tokenizer> llama3 = load_hf_tokenizer_json(write_tokenizer_dir("llama3-style", j));
  EXPECT_EQ(llama3->encode("abc", false), (std::vector<int32_t>{257}));           // the word is a piece
  EXPECT_EQ(llama3->encode("abcab", false), (std::vector<int32_t>{256, 'c', 256}));  // it is not: merges apply
  // Digits split in groups of three, so "3" and "4" of "123456" never meet; GPT-2's regex keeps them together.
  const std::vector<int32_t> digits = llama3->encode("123456", false);
  EXPECT_EQ(std::count(digits.begin(), digits.end(), 258), 0);
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["model"]["ignore_merges"] = false;
  const std::unique_ptr<Tokenizer> gpt2 = load_hf_tokenizer_json(write_tokenizer_dir("gpt2-style", j));
  EXPECT_EQ(gpt2->encode("abc", false), (std::vector<int32_t>{256, 'c'}));
  const std::vector<int32_t> gpt2_digits = gpt2->encode("123456", false);
  EXPECT_EQ(std::count(gpt2_digits.begin(), gpt2_digits.end(), 258), 1);
  if (testing::exists(testing::shared_path(kGpt2Gguf))) {
    for (const PeerCase& c : read_peer_cases(kGpt2Gguf)) EXPECT_EQ(llama3->decode(llama3->encode(c.text, false)), c.text);
  }
}

TEST(HfTokenizerJson, Llama2EncodesLongPromptsQuickly) {
  DRAFTLAB_REQUIRE_SHARED(kLlamaSpmGguf);
  // No pre-tokenizer: each segment between added tokens is one long word for the merge queue.
  std::string text;
  for (const PeerCase& c : read_peer_cases(kLlamaSpmGguf)) text += c.text + "\n";
  while (text.size() < 64 * 1024) text += text;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = hf_llama2().encode(text, true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(hf_llama2().decode(ids), text);
  EXPECT_LT(seconds, 5.0) << text.size() << " bytes";  // a release build takes tens of milliseconds
}

TEST(HfTokenizerJson, BadFilesNameTheFieldThatIsWrong) {
  const auto load = [](const std::string& name, const json& j) {
    const std::string path = write_tokenizer_dir(name, j);
    return [path] { load_hf_tokenizer_json(path); };
  };
  json j = tiny_byte_level_json();
  j.erase("model");
  draftlab::testing::expect_error(load("no-model", j), {"no-model/tokenizer.json", "model: expected an object, got nothing"});

  j = tiny_byte_level_json();
  j["model"]["type"] = "Unigram";
  draftlab::testing::expect_error(load("unigram", j), {"unigram/tokenizer.json", "model.type: expected BPE, got \"Unigram\""});

  j = tiny_byte_level_json();
  j["model"]["merges"] = {"a b", "a c"};
  j["model"]["vocab"].erase("c");
  draftlab::testing::expect_error(load("unknown-merge", j), {"model.merges[1]", "\"c\" is not in the vocabulary"});

  j = tiny_byte_level_json();
  j["model"]["merges"] = {{"a", "b"}, "ab"};
  draftlab::testing::expect_error(load("bad-merge", j), {"model.merges[1]", "two pieces"});

  j = tiny_byte_level_json();
  j["model"]["vocab"].erase("\xC4\x8A");  // "Ċ", the symbol for '\n'
  draftlab::testing::expect_error(load("missing-byte", j), {"model.vocab", "byte 0x0A"});

  j = tiny_byte_level_json();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  draftlab::testing::expect_error(load("whitespace", j), {"pre_tokenizer.type", "got \"Whitespace\""});

  j = tiny_byte_level_json();
  const json digit_split = {{"type", "Split"}, {"pattern", {{"Regex", "\\d+"}}}, {"behavior", "Isolated"}};
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({digit_split})}};
  draftlab::testing::expect_error(load("split", j), {"pre_tokenizer.pretokenizers[0].pattern.Regex", "\\d+"});

  j = tiny_byte_level_json();
  j["normalizer"] = {{"type", "NFC"}};
  draftlab::testing::expect_error(load("nfc", j), {"normalizer.type", "got \"NFC\""});

  j = tiny_byte_level_json();
  j["decoder"] = {{"type", "WordPiece"}};
  draftlab::testing::expect_error(load("wordpiece", j), {"decoder.type", "got \"WordPiece\""});

  j = tiny_byte_level_json();
  j["added_tokens"] = {{{"id", "seven"}, {"content", "<x>"}}};
  draftlab::testing::expect_error(load("added", j), {"added_tokens[0].id", "an integer"});

  j = tiny_byte_level_json();
  j["model"]["unk_token"] = "<unk>";
  draftlab::testing::expect_error(load("unk", j), {"model.unk_token", "<unk>"});

  // Truncated JSON.
  const std::string dir = testing::temp_dir() + "/truncated";
  ::mkdir(dir.c_str(), 0755);
  const std::string text = tiny_byte_level_json().dump();
  write_file_atomically(dir + "/tokenizer.json", text.substr(0, text.size() / 2));
  draftlab::testing::expect_error([&] { load_hf_tokenizer_json(dir + "/tokenizer.json"); }, {"truncated/tokenizer.json", "not valid JSON"});

  draftlab::testing::expect_error([&] { load_hf_tokenizer_json(testing::temp_dir() + "/absent/tokenizer.json"); }, {"absent/tokenizer.json"});
}

}  // namespace
}  // namespace draftlab
