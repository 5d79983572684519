// TextStream: streaming detokenization never emits a broken UTF-8 character, and adds up to decode().
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/base/file_bytes.h"
#include "core/text/text_stream.h"
#include "core/text/tokenizer.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using testing::shared_path;

const char kGguf[] = "tokenizer-tests/ggml-vocab-llama-spm.gguf";
const char kTok512[] = "models/aidreams260K/tok512.bin";
const std::string kReplacement = "\xEF\xBF\xBD";

// Texts of llama.cpp's tokenizer test file (each followed by the separator line).
std::vector<std::string> peer_texts() {
  const std::string inp = read_text_file(shared_path(std::string(kGguf) + ".inp"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t start = 0, end; (end = inp.find(separator, start)) != std::string::npos; start = end + separator.size())
    texts.push_back(inp.substr(start, end - start));
  return texts;
}

// The id of the byte-fallback token for `byte`, found by its spelling in the vocabulary.
int32_t byte_token(const Tokenizer& tok, unsigned char byte) {
  static const char kHex[] = "0123456789ABCDEF";
  const std::string spelling = std::string("<0x") + kHex[byte >> 4] + kHex[byte & 15] + ">";
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    if (tok.piece(id) == spelling) return id;
  ADD_FAILURE() << "no byte token " << spelling;
  return 0;
}

TEST(TextStream, HoldsBackACharacterSplitOverByteTokens) {
  DRAFTLAB_REQUIRE_SHARED(kGguf);
  const auto tok = load_gguf_tokenizer(shared_path(kGguf));
  const std::string llama = "\xF0\x9F\xA6\x99";  // U+1F999, not in the vocabulary: four byte tokens
  const std::vector<int32_t> ids = tok->encode("a" + llama + "b", true);
  TextStream stream(*tok);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(stream.push(id));
  pieces.push_back(stream.finish());

  std::string all;
  int held_back = 0;
  for (const std::string& p : pieces) {
    all += p;
    held_back += p.empty();
    // Nothing ever ends in the middle of a character.
    EXPECT_EQ(p.find(llama.substr(0, 3)) != std::string::npos, p.find(llama) != std::string::npos) << p;
  }
  EXPECT_EQ(all, "a" + llama + "b");
  EXPECT_GE(held_back, 3);  // BOS, then three of the four byte tokens give nothing yet
}

TEST(TextStream, ConcatenatedPushesEqualDecodeForEveryPeerText) {
  DRAFTLAB_REQUIRE_SHARED(kGguf);
  const auto tok = load_gguf_tokenizer(shared_path(kGguf));
  for (const std::string& text : peer_texts()) {
    for (bool bos : {true, false}) {
      const std::vector<int32_t> ids = tok->encode(text, bos);
      TextStream stream(*tok);
      std::string streamed;
      for (int32_t id : ids) streamed += stream.push(id);
      streamed += stream.finish();
      EXPECT_EQ(streamed, tok->decode(ids)) << text;
    }
  }
}

TEST(TextStream, Llama2cGenerationStreamsLikeDecode) {
  DRAFTLAB_REQUIRE_SHARED(kTok512);
  const auto tok = load_llama2c_tokenizer(shared_path(kTok512));
  const std::vector<int32_t> ids = tok->encode("caf\xC3\xA9 \xE6\x97\xA5 ok", true);
  TextStream stream(*tok);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  EXPECT_EQ(stream.finish(), "");
  EXPECT_EQ(streamed, tok->decode(ids));
  EXPECT_EQ(streamed, "caf\xC3\xA9 \xE6\x97\xA5 ok");
}

TEST(TextStream, InvalidBytesBecomeOneReplacementEach) {
  DRAFTLAB_REQUIRE_SHARED(kGguf);
  const auto tok = load_gguf_tokenizer(shared_path(kGguf));
  const int32_t a = tok->encode("a", false).back();  // "▁a"
  {
    // A lead byte followed by a non-continuation: replaced as soon as the next byte shows it cannot complete.
    TextStream stream(*tok);
    EXPECT_EQ(stream.push(tok->bos_id()), "");
    EXPECT_EQ(stream.push(byte_token(*tok, 0xE2)), "");
    EXPECT_EQ(stream.push(byte_token(*tok, 0x82)), "");
    EXPECT_EQ(stream.push(a), kReplacement + " a");
    EXPECT_EQ(stream.finish(), "");
  }
  {
    // Bytes that can never start a character are replaced at once, one U+FFFD each.
    TextStream stream(*tok);
    EXPECT_EQ(stream.push(byte_token(*tok, 0xFF)), kReplacement);
    EXPECT_EQ(stream.push(byte_token(*tok, 0x80)), kReplacement);
    EXPECT_EQ(stream.push(byte_token(*tok, 0xC0)), kReplacement);  // overlong lead
    EXPECT_EQ(stream.push(byte_token(*tok, 0xED)), "");
    EXPECT_EQ(stream.push(byte_token(*tok, 0xA0)), kReplacement + kReplacement);  // surrogate: ED A0 is invalid
    EXPECT_EQ(stream.finish(), "");
  }
  {
    // An unfinished character at the end of the stream is flushed as one U+FFFD.
    TextStream stream(*tok);
    EXPECT_EQ(stream.push(byte_token(*tok, 0x41)), "A");
    EXPECT_EQ(stream.push(byte_token(*tok, 0xF0)), "");
    EXPECT_EQ(stream.push(byte_token(*tok, 0x9F)), "");
    EXPECT_EQ(stream.finish(), kReplacement);
  }
}

TEST(TextStream, DecodeUtf8IsDecodeWithTheCutCharacterReplaced) {
  DRAFTLAB_REQUIRE_SHARED(kGguf);
  const auto tok = load_gguf_tokenizer(shared_path(kGguf));
  const std::string llama = "\xF0\x9F\xA6\x99";  // four byte tokens
  const std::vector<int32_t> ids = tok->encode("a " + llama, true);
  EXPECT_EQ(decode_utf8(*tok, ids), tok->decode(ids));
  // A token budget that ends two bytes into the character: decode() gives the raw bytes, decode_utf8 one U+FFFD.
  const std::vector<int32_t> cut(ids.begin(), ids.end() - 2);
  const std::string raw = tok->decode(cut);
  ASSERT_EQ(raw.substr(raw.size() - 2), llama.substr(0, 2));
  EXPECT_EQ(decode_utf8(*tok, cut), raw.substr(0, raw.size() - 2) + kReplacement);
}

}  // namespace
}  // namespace draftlab
