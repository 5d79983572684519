// Chat templates against strings written out by hand from FastChat's conversation.py (vicuna_v1.1, llama-2),
// the EAGLE evaluation scripts (system prompt, trailing space for LLaMA-2-Chat) and Meta-Llama-3's HF template.
#include "test_errors.h"
#include "core/text/chat_template.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/base/error.h"

namespace draftlab {
namespace {

const std::string kQ1 = "Compose an engaging travel blog post about a recent trip to Hawaii.";
const std::string kA1 = "Aloha! Here is my post.";
const std::string kQ2 = "Rewrite your previous response. Start every sentence with the letter A.";

// What the EAGLE scripts render for MT-bench's second turn: both questions, the first answer, then the open turn.
const std::vector<ChatMessage> kTwoTurns = {{"user", kQ1}, {"assistant", kA1}, {"user", kQ2}};

const std::string kVicunaSystem =
    "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
    "detailed, and polite answers to the user's questions.";
const std::string kLlama2System =
    "You are a helpful, respectful and honest assistant. Always answer as helpfully as possible, while being "
    "safe.  Your answers should not include any harmful, unethical, racist, sexist, toxic, dangerous, or illegal "
    "content. Please ensure that your responses are socially unbiased and positive in nature.\n\nIf a question does "
    "not make any sense, or is not factually coherent, explain why instead of answering something not correct. If "
    "you don't know the answer to a question, please don't share false information.";

TEST(ChatTemplate, VicunaTwoTurns) {
  EXPECT_EQ(render_chat(ChatTemplate::VicunaV11, kTwoTurns, true),
            kVicunaSystem + " USER: " + kQ1 + " ASSISTANT: " + kA1 + "</s>USER: " + kQ2 + " ASSISTANT:");
  EXPECT_EQ(render_chat(ChatTemplate::VicunaV11, {{"user", kQ1}}, true),
            kVicunaSystem + " USER: " + kQ1 + " ASSISTANT:");
  // A finished exchange ends with the assistant's "</s>".
  EXPECT_EQ(render_chat(ChatTemplate::VicunaV11, {{"user", kQ1}, {"assistant", kA1}}, false),
            kVicunaSystem + " USER: " + kQ1 + " ASSISTANT: " + kA1 + "</s>");
}

TEST(ChatTemplate, Llama2ChatTwoTurns) {
  EXPECT_EQ(render_chat(ChatTemplate::Llama2Chat, kTwoTurns, true),
            "[INST] <<SYS>>\n" + kLlama2System + "\n<</SYS>>\n\n" + kQ1 + " [/INST] " + kA1 + " </s><s>[INST] " + kQ2 +
                " [/INST] ");
  EXPECT_EQ(render_chat(ChatTemplate::Llama2Chat, {{"user", kQ1}}, true),
            "[INST] <<SYS>>\n" + kLlama2System + "\n<</SYS>>\n\n" + kQ1 + " [/INST] ");
  // FastChat without a system prompt: no <<SYS>> block.
  EXPECT_EQ(render_chat(ChatTemplate::Llama2Chat, {{"system", ""}, {"user", kQ1}}, true), "[INST] " + kQ1 + " [/INST] ");
  EXPECT_EQ(render_chat(ChatTemplate::Llama2Chat, {{"system", "Be brief."}, {"user", kQ1}}, true),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n" + kQ1 + " [/INST] ");
}

TEST(ChatTemplate, Llama3InstructTwoTurns) {
  EXPECT_EQ(render_chat(ChatTemplate::Llama3Instruct, kTwoTurns, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" + kLlama2System +
                "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n" + kQ1 +
                "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n" + kA1 +
                "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n" + kQ2 +
                "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  // Contents are trimmed, as the HF template's `| trim` does; no generation prompt when not asked for.
  EXPECT_EQ(render_chat(ChatTemplate::Llama3Instruct, {{"system", "  Be brief.\n"}, {"user", "\n hi \t"}}, false),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>");
  EXPECT_EQ(render_chat(ChatTemplate::Llama3Instruct, {{"system", ""}, {"user", "hi"}}, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, PlainJoinsTurnsWithNewlines) {
  EXPECT_EQ(render_chat(ChatTemplate::Plain, kTwoTurns, true), kQ1 + "\n" + kA1 + "\n" + kQ2);
  EXPECT_EQ(render_chat(ChatTemplate::Plain, {{"user", "once upon a time"}}, true), "once upon a time");
  EXPECT_EQ(render_chat(ChatTemplate::Plain, {{"system", "story:"}, {"user", "once"}}, false), "story:\nonce");
}

TEST(ChatTemplate, DefaultSystemMessagesAreTheEagleOnes) {
  EXPECT_EQ(default_system_message(ChatTemplate::VicunaV11), kVicunaSystem);
  EXPECT_EQ(default_system_message(ChatTemplate::Llama2Chat), kLlama2System);
  EXPECT_EQ(default_system_message(ChatTemplate::Llama3Instruct), kLlama2System);
  EXPECT_EQ(default_system_message(ChatTemplate::Plain), "");
}

TEST(ChatTemplate, NamesParseAndUnknownNamesListTheValidOnes) {
  EXPECT_EQ(parse_chat_template("plain"), ChatTemplate::Plain);
  EXPECT_EQ(parse_chat_template("vicuna"), ChatTemplate::VicunaV11);
  EXPECT_EQ(parse_chat_template("llama2-chat"), ChatTemplate::Llama2Chat);
  EXPECT_EQ(parse_chat_template("llama3-instruct"), ChatTemplate::Llama3Instruct);
  for (ChatTemplate t : {ChatTemplate::Plain, ChatTemplate::VicunaV11, ChatTemplate::Llama2Chat, ChatTemplate::Llama3Instruct})
    EXPECT_EQ(parse_chat_template(chat_template_name(t)), t);
  draftlab::testing::expect_error([] { parse_chat_template("chatml"); },
               {"chatml", "plain", "vicuna", "llama2-chat", "llama3-instruct"});
}

TEST(ChatTemplateErrors, MalformedConversations) {
  draftlab::testing::expect_error([] { render_chat(ChatTemplate::VicunaV11, {{"bot", "hi"}}, true); }, {"messages[0].role", "\"bot\""});
  draftlab::testing::expect_error([] { render_chat(ChatTemplate::Llama2Chat, {{"user", "a"}, {"system", "b"}}, true); },
               {"messages[1].role", "first"});
  draftlab::testing::expect_error([] { render_chat(ChatTemplate::Llama3Instruct, {{"user", "a"}, {"user", "b"}}, true); },
               {"messages[1].role", "alternate"});
  draftlab::testing::expect_error([] { render_chat(ChatTemplate::VicunaV11, {{"assistant", "a"}}, false); }, {"messages[0].role", "user"});
  draftlab::testing::expect_error([] { render_chat(ChatTemplate::VicunaV11, {{"user", "a"}, {"assistant", "b"}}, true); },
               {"messages", "assistant message last"});
  draftlab::testing::expect_error([] { render_chat(ChatTemplate::Plain, {}, true); }, {"no user message"});
}

}  // namespace
}  // namespace draftlab
