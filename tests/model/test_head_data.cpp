// EAGLE head training data: chat loss masks placed from the template strings, JSONL and token-line errors naming
// file:line, masks travelling with their windows, and target-generated data equal to the target's own decoding.
#include <gtest/gtest.h>

#include <fstream>

#include "core/decoding/vanilla_decoder.h"
#include "core/model/rope.h"
#include "core/model/training_forward.h"
#include "core/training/chat_dataset.h"
#include "core/training/head_data.h"
#include "model_fixtures.h"
#include "test_errors.h"
#include "test_paths.h"

namespace draftlab {
namespace {

// One token per byte (id = byte + 3), BOS 1, EOS 2; optionally ": " as one token (id 259), to test a token that
// crosses the boundary between template and answer.
class CharTokenizer : public Tokenizer {
 public:
  explicit CharTokenizer(bool merge_colon_space = false) : merge_(merge_colon_space) {}
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(1);
    for (size_t i = 0; i < text.size(); ++i) {
      if (merge_ && text[i] == ':' && i + 1 < text.size() && text[i + 1] == ' ') {
        ids.push_back(259);
        ++i;
      } else {
        ids.push_back(static_cast<uint8_t>(text[i]) + 3);
      }
    }
    return ids;
  }
  std::string token_bytes(int32_t, int32_t id) const override {
    if (id == 259) return ": ";
    return id >= 3 ? std::string(1, static_cast<char>(id - 3)) : "";
  }
  const std::string& piece(int32_t) const override { return empty_; }
  int32_t vocab_size() const override { return 260; }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return 2; }

 private:
  bool merge_;
  std::string empty_;
};

const std::vector<ChatMessage> kTwoTurns = {
    {"system", ""}, {"user", "hi"}, {"assistant", "yo"}, {"user", "ok"}, {"assistant", "no"}};

std::vector<uint8_t> ones_at(size_t n, const std::vector<std::pair<size_t, size_t>>& ranges) {
  std::vector<uint8_t> m(n, 0);
  for (const auto& [a, b] : ranges)
    for (size_t i = a; i < b; ++i) m[i] = 1;
  return m;
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = testing::temp_dir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ChatMask, VicunaTwoTurnsIsOneExactlyOnTheAnswersAndTheirEndMarker) {
  // Empty system prompt: " " + "USER: hi " + "ASSISTANT:" | " yo</s>" | "USER: ok " + "ASSISTANT:" | " no</s>"
  // characters: " USER: hi ASSISTANT:" = 0..19, " yo</s>" = 20..26, "USER: ok ASSISTANT:" = 27..45,
  // " no</s>" = 46..52; one token per character after BOS, so token = character + 1.
  const CharTokenizer tok;
  const MaskedSequence s = tokenize_chat(ChatTemplate::VicunaV11, kTwoTurns, tok);
  ASSERT_EQ(tok.decode(s.tokens), " USER: hi ASSISTANT: yo</s>USER: ok ASSISTANT: no</s>");
  ASSERT_EQ(s.tokens.size(), 54u);
  EXPECT_EQ(s.mask, ones_at(54, {{21, 28}, {47, 54}}));
}

TEST(ChatMask, Llama2LeavesTheNextTurnsBosToTheUser) {
  // "[INST] hi " (0..9) "[/INST] " (10..17) | "yo </s>" (18..24) | "<s>[INST] ok [/INST] " (25..45) | "no </s>"
  // (46..52) | "<s>" (53..55)
  const CharTokenizer tok;
  const MaskedSequence s = tokenize_chat(ChatTemplate::Llama2Chat, kTwoTurns, tok);
  ASSERT_EQ(tok.decode(s.tokens), "[INST] hi [/INST] yo </s><s>[INST] ok [/INST] no </s><s>");
  EXPECT_EQ(s.mask, ones_at(57, {{19, 26}, {47, 54}}));
}

TEST(ChatMask, PlainLeavesTheJoiningNewlineToTheUser) {
  // "hi\nyo\nok\nno": "yo" = 3..4, "no" = 9..10
  const CharTokenizer tok;
  const MaskedSequence s = tokenize_chat(ChatTemplate::Plain, kTwoTurns, tok);
  EXPECT_EQ(s.mask, ones_at(12, {{4, 6}, {10, 12}}));
}

TEST(ChatMask, ATokenCrossingIntoTheAnswerBelongsToIt) {
  // ": " is one token; after "ASSISTANT" it holds the answer's leading space, after "USER" it does not.
  const CharTokenizer tok(/*merge_colon_space=*/true);
  const MaskedSequence s = tokenize_chat(ChatTemplate::VicunaV11, kTwoTurns, tok);
  std::vector<std::string> runs;
  for (size_t i = 0; i < s.mask.size(); ++i) {
    if (!s.mask[i]) continue;
    if (i == 0 || !s.mask[i - 1]) runs.emplace_back();
    runs.back() += tok.token_bytes(-1, s.tokens[i]);
  }
  EXPECT_EQ(runs, (std::vector<std::string>{": yo</s>", ": no</s>"}));
}

TEST(ChatMask, RealTokenizerMasksExactlyTheAnswerTokens) {
  const auto tok = load_tokenizer(testing::source_path("data/models/ts-tiny"));
  const std::vector<ChatMessage> chat = {{"user", "once upon a time"}, {"assistant", "there was a dog."}};
  const MaskedSequence s = tokenize_chat(ChatTemplate::Plain, chat, *tok);
  std::vector<int32_t> masked, unmasked;
  for (size_t i = 0; i < s.tokens.size(); ++i) (s.mask[i] ? masked : unmasked).push_back(s.tokens[i]);
  EXPECT_EQ(tok->decode(masked), "there was a dog.");
  EXPECT_EQ(tok->decode(unmasked), "once upon a time\n");
  // The masked tokens are the tail of the whole-text tokenization, not a separate encoding.
  EXPECT_EQ(s.tokens, tok->encode("once upon a time\nthere was a dog.", true));
}

TEST(ChatJsonl, ReadsBothShapesAndDropsALeadingAssistantTurn) {
  const std::string path = write_file(
      "chat_ok.jsonl",
      "{\"conversations\": [{\"from\": \"gpt\", \"value\": \"stray\"}, {\"from\": \"human\", \"value\": \"a\"}, "
      "{\"from\": \"gpt\", \"value\": \"b\"}]}\n"
      "\n"
      "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"c\"}, "
      "{\"role\": \"assistant\", \"content\": \"d\"}]}\n");
  const auto chats = read_chat_jsonl(path);
  ASSERT_EQ(chats.size(), 2u);
  EXPECT_EQ(chats[0].line, 1);
  ASSERT_EQ(chats[0].messages.size(), 2u);
  EXPECT_EQ(chats[0].messages[0].role, "user");
  EXPECT_EQ(chats[0].messages[1].content, "b");
  EXPECT_EQ(chats[1].line, 3);
  ASSERT_EQ(chats[1].messages.size(), 3u);
  EXPECT_EQ(chats[1].messages[0].role, "system");
  EXPECT_EQ(chats[1].messages[2].role, "assistant");
}

TEST(ChatJsonl, BadLinesNameFileLineAndField) {
  const std::string good = "{\"messages\": [{\"role\": \"user\", \"content\": \"c\"}]}\n";
  const std::string p1 = write_file("bad1.jsonl", good + good + "{\"messages\": [\n");
  testing::expect_error([&] { read_chat_jsonl(p1); }, {p1 + ":3", "not valid JSON"});
  const std::string p2 = write_file("bad2.jsonl", good + "{\"conversations\": [{\"from\": \"human\", \"value\": \"x\"}, "
                                                         "{\"from\": \"bing\", \"value\": \"y\"}]}\n");
  testing::expect_error([&] { read_chat_jsonl(p2); }, {p2 + ":2", "conversations[1].from", "\"bing\"", "\"gpt\""});
  const std::string p3 = write_file("bad3.jsonl", "{\"messages\": [{\"role\": \"user\", \"text\": \"c\"}]}\n");
  testing::expect_error([&] { read_chat_jsonl(p3); }, {p3 + ":1", "messages[0].content", "no \"content\""});
  const std::string p4 = write_file("bad4.jsonl", good + "{\"turns\": [\"q\"]}\n");
  testing::expect_error([&] { read_chat_jsonl(p4); }, {p4 + ":2", "conversations / messages"});
  const std::string p5 = write_file("bad5.jsonl", good + "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}\n");
  testing::expect_error([&] { read_chat_jsonl(p5); }, {p5 + ":2", "messages[0].content", "a string", "5"});
  // Two user turns in a row: the template's error, prefixed with the file and line.
  const std::string p6 = write_file("bad6.jsonl", good + good + "{\"messages\": [{\"role\": \"user\", \"content\": "
                                                                "\"a\"}, {\"role\": \"user\", \"content\": \"b\"}]}\n");
  const CharTokenizer tok;
  testing::expect_error([&] { load_chat_dataset(p6, tok, ChatTemplate::VicunaV11, 2); },
                        {p6 + ":3", "messages[1].role", "alternate"});
}

TEST(TokenLines, PromptBeforeTheBarIsMaskedAndBadTokensNameTheLine) {
  const std::string path = write_file("lines.tokens", "1 5 6 | 7 8\n\n1 9 10\n");
  bool masked = false;
  const auto seqs = read_token_lines(path, 97, &masked);
  EXPECT_TRUE(masked);
  ASSERT_EQ(seqs.size(), 2u);
  EXPECT_EQ(seqs[0].tokens, (std::vector<int32_t>{1, 5, 6, 7, 8}));
  EXPECT_EQ(seqs[0].mask, (std::vector<uint8_t>{0, 0, 0, 1, 1}));
  EXPECT_EQ(seqs[1].mask, (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(format_token_line({1, 5, 6}, {7, 8}), "1 5 6 | 7 8");

  const std::string bad = write_file("bad.tokens", "1 2 3\n1 2 x 4\n");
  testing::expect_error([&] { read_token_lines(bad, 97); }, {bad + ":2", "token 3", "\"x\"", "0..96"});
  const std::string big = write_file("big.tokens", "1 97\n");
  testing::expect_error([&] { read_token_lines(big, 97); }, {big + ":1", "token 2", "\"97\""});
  const std::string two = write_file("two.tokens", "1 | 2 | 3\n");
  testing::expect_error([&] { read_token_lines(two, 97); }, {two + ":1", "at most one"});
}

TEST(MaskedDataset, WindowMasksAreCutAtTheWindowsOffsets) {
  // mask[i] = token i is odd: the mask of every window must equal its tokens' parity.
  std::vector<int32_t> train, validation;
  for (int i = 0; i < 500; ++i) train.push_back((i * 37 + 11) % 97);
  for (int i = 0; i < 200; ++i) validation.push_back((i * 53 + 5) % 97);
  auto parity = [](const std::vector<int32_t>& v) {
    std::vector<uint8_t> m;
    for (int32_t t : v) m.push_back(t % 2);
    return m;
  };
  const TextDataset plain(train, validation);
  const TextDataset masked(train, validation, parity(train), parity(validation), 1);
  EXPECT_FALSE(plain.has_loss_mask());
  EXPECT_TRUE(masked.has_loss_mask());
  for (int64_t step : {0, 1, 17}) {
    const auto w = masked.train_batch(4, 9, 3, step);
    EXPECT_TRUE(at::equal(w, plain.train_batch(4, 9, 3, step)));  // masks change nothing about the windows
    EXPECT_TRUE(at::equal(masked.train_rows(4, 9, 3, step).mask, w.remainder(2).to(at::kFloat)));
  }
  const auto v = masked.validation_windows(9, 5);
  EXPECT_TRUE(at::equal(masked.validation_rows(9, 5).mask, v.remainder(2).to(at::kFloat)));
  EXPECT_NE(plain.fingerprint(), masked.fingerprint());
}

// Greedy continuation by full recomputation (no KV cache): argmax of the last row of training_forward.
std::vector<int64_t> naive_greedy(const LlamaModel& m, std::vector<int64_t> seq, int64_t n, int64_t stop) {
  const RotaryEmbedding rope(m.config(), m.options());
  std::vector<int64_t> out;
  at::NoGradGuard no_grad;
  for (int64_t i = 0; i < n; ++i) {
    const auto logits = training_forward(m.config(), m.weights(), rope, testing::long_tensor(seq).unsqueeze(0));
    const int64_t next = logits[0][-1].argmax().item<int64_t>();
    if (next == stop) break;
    out.push_back(next);
    seq.push_back(next);
  }
  return out;
}

TEST(GeneratedData, IsTheTargetsGreedyContinuationAndReadsBack) {
  auto target = testing::tiny_model();
  const std::vector<std::vector<int64_t>> prompts = {{1, 5, 9, 33}, {1, 20}, {1, 70, 71, 72, 73, 74}};
  GenerationConfig g;
  g.max_new_tokens = 12;
  g.stop_tokens = {2};
  int64_t calls = 0;
  const auto seqs = generate_head_data(*target, prompts, g, [&](int64_t done, int64_t) { calls = done; });
  EXPECT_EQ(calls, 3);
  ASSERT_EQ(seqs.size(), 3u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(seqs[i].prompt, prompts[i]);
    EXPECT_GE(seqs[i].continuation.size(), 4u);  // a real continuation, not an immediate stop
    EXPECT_EQ(seqs[i].continuation, generate_vanilla(*target, prompts[i], g).tokens);
    EXPECT_EQ(seqs[i].continuation, naive_greedy(*target, prompts[i], 12, 2)) << "prompt " << i;
  }
  CharTokenizer tok;
  const std::string path = testing::temp_dir() + "/generated.tokens";
  write_head_data(path, HeadDataFormat::Tokens, seqs, tok);
  bool masked = false;
  const auto back = read_token_lines(path, 97, &masked);
  EXPECT_TRUE(masked);
  ASSERT_EQ(back.size(), 3u);
  for (size_t i = 0; i < seqs.size(); ++i) {
    std::vector<int32_t> all(prompts[i].begin(), prompts[i].end());
    all.insert(all.end(), seqs[i].continuation.begin(), seqs[i].continuation.end());
    EXPECT_EQ(back[i].tokens, all);
    std::vector<uint8_t> mask(all.size(), 1);
    std::fill(mask.begin(), mask.begin() + static_cast<ptrdiff_t>(prompts[i].size()), 0);
    EXPECT_EQ(back[i].mask, mask);
  }
}

TEST(GeneratedData, SampledPromptISamplesWithSeedPlusI) {
  auto target = testing::tiny_model();
  const std::vector<std::vector<int64_t>> prompts = {{1, 5}, {1, 5}};
  GenerationConfig g;
  g.max_new_tokens = 16;
  g.sampling.temperature = 1.0;
  g.seed = 40;
  const auto seqs = generate_head_data(*target, prompts, g);
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationConfig gi = g;
    gi.seed = 40 + i;
    EXPECT_EQ(seqs[i].continuation, generate_vanilla(*target, prompts[i], gi).tokens);
  }
  EXPECT_NE(seqs[0].continuation, seqs[1].continuation);  // same prompt, different seeds
  // Batched (both prompts together, and a batch with room for three): the same continuations.
  for (int64_t batch : {2, 3}) {
    const auto batched = generate_head_data(*target, prompts, g, {}, batch);
    ASSERT_EQ(batched.size(), seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(batched[i].continuation, seqs[i].continuation) << batch << " " << i;
  }
}

TEST(Prompts, FromLinesBenchQuestionsAndCorpusOpenings) {
  CharTokenizer tok;
  const std::string lines = write_file("prompts.txt", "ab\n\ncd\n");
  const auto p = prompts_from_file(lines, tok, ChatTemplate::Plain);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1], (std::vector<int64_t>{1, 'c' + 3, 'd' + 3}));
  const std::string bench = write_file("q.jsonl", "{\"question_id\": 1, \"turns\": [\"hi\", \"more\"]}\n");
  const auto q = prompts_from_file(bench, tok, ChatTemplate::VicunaV11);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(tok.decode(std::vector<int32_t>(q[0].begin(), q[0].end())),
            default_system_message(ChatTemplate::VicunaV11) + " USER: hi ASSISTANT:");
  const std::string badq = write_file("badq.jsonl", "{\"turns\": [\"x\"]}\n{\"question\": \"y\"}\n");
  testing::expect_error([&] { prompts_from_file(badq, tok, ChatTemplate::Plain); }, {badq + ":2", "turns"});
  // Stories 0..5, validation_every 3: stories 2 and 5 are the corpus' validation split and are skipped.
  const std::string corpus = write_file("corpus.txt", "s0 abc\n\ns1 def\n\ns2 ghi\n\ns3 jkl\n\ns4 mno\n\ns5 pqr\n");
  const auto c = prompts_from_corpus(corpus, tok, 2, 0, 3);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[2], (std::vector<int64_t>{1, 's' + 3, '3' + 3}));
  EXPECT_EQ(prompts_from_corpus(corpus, tok, 2, 3, 3).size(), 3u);
}

}  // namespace
}  // namespace draftlab
