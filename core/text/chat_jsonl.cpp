#include "core/text/chat_jsonl.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/error.h"

namespace draftlab {

namespace {

std::string quoted(const nlohmann::json& j) {
  std::string s = j.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

const nlohmann::json& string_field(const nlohmann::json& object, const std::string& key, const std::string& where,
                                   const std::string& field) {
  auto it = object.find(key);
  if (it == object.end()) throw Error::in_file(where, field, "a string", "no \"" + key + "\"");
  if (!it->is_string()) throw Error::in_file(where, field, "a string", quoted(*it));
  return *it;
}

// "human"/"gpt"/... or "user"/"assistant"/... to the chat template's role names; "" when unknown.
std::string sharegpt_role(const std::string& from) {
  if (from == "human" || from == "user") return "user";
  if (from == "gpt" || from == "chatgpt" || from == "assistant") return "assistant";
  if (from == "system") return "system";
  return "";
}

std::vector<ChatMessage> parse_conversation(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw Error::in_file(where, "line", "a JSON object", quoted(j));
  const bool sharegpt = j.contains("conversations");
  const std::string list_key = sharegpt ? "conversations" : "messages";
  if (!j.contains(list_key))
    throw Error::in_file(where, "conversations / messages", "one of the two keys (a list of turns)", "neither");
  const nlohmann::json& list = j.at(list_key);
  if (!list.is_array()) throw Error::in_file(where, list_key, "a list of turns", quoted(list));
  const std::string role_key = sharegpt ? "from" : "role", text_key = sharegpt ? "value" : "content";
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string field = list_key + "[" + std::to_string(i) + "]";
    const nlohmann::json& turn = list[i];
    if (!turn.is_object()) throw Error::in_file(where, field, "an object", quoted(turn));
    const std::string raw_role = string_field(turn, role_key, where, field + "." + role_key).get<std::string>();
    const std::string role = sharegpt ? sharegpt_role(raw_role) : raw_role;
    if (role != "user" && role != "assistant" && role != "system")
      throw Error::in_file(where, field + "." + role_key,
                           sharegpt ? "\"human\", \"gpt\" or \"system\"" : "\"user\", \"assistant\" or \"system\"",
                           "\"" + raw_role + "\"");
    messages.push_back({role, string_field(turn, text_key, where, field + "." + text_key).get<std::string>()});
  }
  // A conversation that starts with the assistant (after an optional system message): drop that turn, as the
  // official EAGLE data script does (`if roles[source[0]["from"]] != conv.roles[0]: source = source[1:]`).
  const size_t first = !messages.empty() && messages[0].role == "system" ? 1 : 0;
  if (messages.size() > first && messages[first].role == "assistant") messages.erase(messages.begin() + first);
  return messages;
}

// Length of the common prefix of a and b.
size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

std::vector<ChatConversation> read_chat_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error::at(path, "cannot open the chat JSONL file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_chat_jsonl(text.str(), path);
}

std::vector<ChatConversation> parse_chat_jsonl(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::vector<ChatConversation> out;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(number);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error::at(where, std::string("not valid JSON (") + e.what() + ")");
    }
    out.push_back({parse_conversation(j, where), number});
  }
  if (out.empty()) throw Error::at(path, "no conversations (expected one JSON object per line)");
  return out;
}

bool chat_add_bos(ChatTemplate t) { return t != ChatTemplate::Llama3Instruct; }

std::vector<std::pair<size_t, size_t>> assistant_spans(ChatTemplate t, const std::vector<ChatMessage>& messages) {
  std::vector<std::pair<size_t, size_t>> spans;
  const std::string full = render_chat(t, messages, false);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    const std::vector<ChatMessage> before(messages.begin(), messages.begin() + static_cast<ptrdiff_t>(i));
    const std::vector<ChatMessage> through(messages.begin(), messages.begin() + static_cast<ptrdiff_t>(i) + 1);
    const std::string opened = render_chat(t, before, true), closed = render_chat(t, through, false);
    // Every template here renders a conversation as a prefix of its continuations; check rather than assume.
    check(closed.compare(0, opened.size(), opened) == 0 && full.compare(0, closed.size(), closed) == 0,
          std::string("chat template ") + chat_template_name(t) + ": renderings of a conversation's prefixes are not "
          "prefixes of each other; the assistant mask cannot be placed");
    size_t start = opened.size(), end = closed.size();
    if (t == ChatTemplate::Plain && start < end && full[start] == '\n') ++start;  // the separator, not the answer
    if (t == ChatTemplate::Llama2Chat && end - start >= 3 && closed.compare(end - 3, 3, "<s>") == 0) end -= 3;
    spans.emplace_back(start, end);
  }
  return spans;
}

MaskedSequence tokenize_chat(ChatTemplate t, const std::vector<ChatMessage>& messages, const Tokenizer& tokenizer) {
  const bool bos = chat_add_bos(t);
  const std::string text = render_chat(t, messages, false);
  MaskedSequence out;
  out.tokens = tokenizer.encode(text, bos);
  out.mask.assign(out.tokens.size(), 0);
  // Tokens [0, n) lie wholly in text[:pos] when they are a common prefix of the tokenization of text[:pos] and of
  // the whole; where the two part, the whole's next token crosses pos.
  auto boundary = [&](size_t pos, bool include_crossing) {
    const std::vector<int32_t> prefix = tokenizer.encode(std::string_view(text).substr(0, pos), bos);
    const size_t n = common_prefix(prefix, out.tokens);
    return n < prefix.size() && include_crossing ? std::min(n + 1, out.tokens.size()) : n;
  };
  for (const auto& [a, b] : assistant_spans(t, messages)) {
    if (a >= b) continue;
    const size_t first = boundary(a, false), last = boundary(b, true);
    for (size_t i = first; i < last; ++i) out.mask[i] = 1;
  }
  return out;
}

}  // namespace draftlab
