#include "core/text/chat_template.h"

#include "core/base/error.h"

namespace draftlab {

namespace {

// FastChat conversation.py, template "vicuna_v1.1".
const std::string kVicunaSystem =
    "A chat between a curious user and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the user's questions.";

// The Llama-2 default system prompt, verbatim (including the double space after "safe.") as the EAGLE scripts
// gen_ea_answer_llama2chat.py and gen_ea_answer_llama3chat.py set it.
const std::string kLlama2System =
    "You are a helpful, respectful and honest assistant. Always answer as helpfully as possible, while being safe.  "
    "Your answers should not include any harmful, unethical, racist, sexist, toxic, dangerous, or illegal content. "
    "Please ensure that your responses are socially unbiased and positive in nature.\n\n"
    "If a question does not make any sense, or is not factually coherent, explain why instead of answering "
    "something not correct. If you don't know the answer to a question, please don't share false information.";

const std::string kNoSystem;

// A validated conversation: the system prompt to use and the user/assistant turns in order.
struct Conversation {
  std::string system;
  std::vector<const ChatMessage*> turns;  // even index: user, odd index: assistant
};

Conversation split_conversation(ChatTemplate t, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  const std::string source = std::string("chat template ") + chat_template_name(t);
  Conversation c;
  c.system = default_system_message(t);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string field = "messages[" + std::to_string(i) + "].role";
    if (m.role == "system") {
      if (i != 0) throw Error::in_file(source, field, "\"system\" only as the first message", "\"system\"");
      c.system = m.content;
      continue;
    }
    // FastChat assigns roles by position (roles[i % 2]); a conversation that does not alternate cannot be rendered.
    const char* expected = c.turns.size() % 2 == 0 ? "user" : "assistant";
    if (m.role != "user" && m.role != "assistant")
      throw Error::in_file(source, field, "\"system\", \"user\" or \"assistant\"", "\"" + m.role + "\"");
    if (m.role != expected)
      throw Error::in_file(source, field, std::string("\"") + expected + "\" (user and assistant alternate, user first)",
                           "\"" + m.role + "\"");
    c.turns.push_back(&m);
  }
  if (add_generation_prompt && c.turns.size() % 2 == 0)
    throw Error::in_file(source, "messages", "a user message last when add_generation_prompt is set",
                         c.turns.empty() ? "no user message" : "an assistant message last");
  return c;
}

// Jinja's `trim` (Python str.strip()) on ASCII whitespace.
std::string trim(const std::string& s) {
  const char* ws = " \t\n\r\v\f";
  const size_t begin = s.find_first_not_of(ws);
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(ws) - begin + 1);
}

std::string render_plain(const Conversation& c) {
  std::string out = c.system;
  for (const ChatMessage* m : c.turns) {
    if (!out.empty()) out += "\n";
    out += m->content;
  }
  return out;
}

// FastChat SeparatorStyle.ADD_COLON_TWO, sep " ", sep2 "</s>", roles ("USER", "ASSISTANT"):
//   ret = system + sep; each message: role + ": " + content + (user ? sep : sep2); open turn: role + ":".
// (FastChat writes system + " " even for an empty system prompt; so do we.)
std::string render_vicuna(const Conversation& c, bool add_generation_prompt) {
  std::string out = c.system + " ";
  for (size_t i = 0; i < c.turns.size(); ++i) {
    const bool user = i % 2 == 0;
    out += user ? "USER: " : "ASSISTANT: ";
    out += c.turns[i]->content;
    out += user ? " " : "</s>";
  }
  if (add_generation_prompt) out += "ASSISTANT:";
  return out;
}

// FastChat SeparatorStyle.LLAMA2, template "llama-2": system_template "[INST] <<SYS>>\n{system}\n<</SYS>>\n\n",
// roles ("[INST]", "[/INST]"), sep " ", sep2 " </s><s>":
//   ret = system ? system_template : "[INST] "; message 0: content + " "; later messages: role + " " + content + sep;
//   open turn: "[/INST]". The EAGLE script then appends " " (prompt = conv.get_prompt() + " ").
std::string render_llama2(const Conversation& c, bool add_generation_prompt) {
  std::string out = c.system.empty() ? "[INST] " : "[INST] <<SYS>>\n" + c.system + "\n<</SYS>>\n\n";
  for (size_t i = 0; i < c.turns.size(); ++i) {
    const bool user = i % 2 == 0;
    if (i == 0) {
      out += c.turns[i]->content + " ";
    } else {
      out += user ? "[INST] " : "[/INST] ";
      out += c.turns[i]->content;
      out += user ? " " : " </s><s>";
    }
  }
  if (add_generation_prompt) out += "[/INST] ";
  return out;
}

// Meta-Llama-3-8B-Instruct tokenizer_config.json chat_template:
//   bos_token + for each message: "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + trim(content) +
//   "<|eot_id|>"; generation prompt "<|start_header_id|>assistant<|end_header_id|>\n\n".
// An empty system prompt is left out (the HF template would write an empty system block, which nobody wants).
std::string render_llama3(const Conversation& c, bool add_generation_prompt) {
  auto block = [](const std::string& role, const std::string& content) {
    return "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + trim(content) + "<|eot_id|>";
  };
  std::string out = "<|begin_of_text|>";
  if (!c.system.empty()) out += block("system", c.system);
  for (size_t i = 0; i < c.turns.size(); ++i) out += block(i % 2 == 0 ? "user" : "assistant", c.turns[i]->content);
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace

ChatTemplate parse_chat_template(const std::string& name) {
  for (ChatTemplate t : {ChatTemplate::Plain, ChatTemplate::VicunaV11, ChatTemplate::Llama2Chat,
                         ChatTemplate::Llama3Instruct})
    if (name == chat_template_name(t)) return t;
  throw Error::in_file("chat template", "name", "one of plain, vicuna, llama2-chat, llama3-instruct",
                       "\"" + name + "\"");
}

const char* chat_template_name(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::Plain: return "plain";
    case ChatTemplate::VicunaV11: return "vicuna";
    case ChatTemplate::Llama2Chat: return "llama2-chat";
    case ChatTemplate::Llama3Instruct: return "llama3-instruct";
  }
  return "plain";
}

const std::string& default_system_message(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::VicunaV11: return kVicunaSystem;
    case ChatTemplate::Llama2Chat:
    case ChatTemplate::Llama3Instruct: return kLlama2System;
    case ChatTemplate::Plain: break;
  }
  return kNoSystem;
}

std::string render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  const Conversation c = split_conversation(t, messages, add_generation_prompt);
  switch (t) {
    case ChatTemplate::Plain: return render_plain(c);
    case ChatTemplate::VicunaV11: return render_vicuna(c, add_generation_prompt);
    case ChatTemplate::Llama2Chat: return render_llama2(c, add_generation_prompt);
    case ChatTemplate::Llama3Instruct: return render_llama3(c, add_generation_prompt);
  }
  return render_plain(c);
}

}  // namespace draftlab
