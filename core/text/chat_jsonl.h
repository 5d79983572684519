// Chat training data for draft heads (torch-free; core/training/chat_dataset.h makes the dataset): conversations in
// JSON Lines, rendered with a chat template, tokenized, with a loss mask that is 1 exactly on the assistant's turns
// (what the template writes for an assistant message: its text and its end marker) and 0 on system, user and
// template text - the ShareGPT setup of the EAGLE paper.
//
// One conversation per line, in either of two shapes (blank lines are skipped):
//   ShareGPT: {"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}, ...]}
//             "from": "human" or "user" -> user, "gpt", "chatgpt" or "assistant" -> assistant, "system" -> system
//   OpenAI:   {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}, ...]}
//             "role": "system", "user" or "assistant"
// A leading assistant message (ShareGPT dumps have some) is dropped, as the official EAGLE data script does; after
// that user and assistant must alternate (chat_template.h). Errors name the file, the line and the field.
//
// Which tokens are the assistant's: the text is tokenized whole (as the model sees it at inference), and each
// assistant turn is the character span [start, end) between render(messages before it, generation prompt) and
// render(messages up to it). A token is an assistant token when it holds any byte of such a span (a token that
// straddles the boundary, like SentencePiece's "▁Hello" after "ASSISTANT:", belongs to the answer). Per template:
//   vicuna       " <answer></s>"            (the space after "ASSISTANT:" and the "</s>" end marker)
//   llama2-chat  "<answer> </s>"            (the "<s>" that FastChat's sep2 appends opens the next user turn)
//   llama3       "<answer><|eot_id|>"
//   plain        "<answer>"                 (the "\n" joining messages is not part of the answer)
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/text/chat_template.h"
#include "core/text/masked_sequence.h"
#include "core/text/tokenizer.h"

namespace draftlab {

struct ChatConversation {
  std::vector<ChatMessage> messages;
  int64_t line = 0;  // 1-based line in the file, for errors
};

// Parses a chat JSONL file. Throws Error "FILE:LINE: FIELD: expected ..., got ..." on any malformed line.
std::vector<ChatConversation> read_chat_jsonl(const std::string& path);
// The same over the file's text (`path` names it in errors).
std::vector<ChatConversation> parse_chat_jsonl(const std::string& text, const std::string& path);

// The conversation rendered with `t` (no generation prompt), tokenized with the template's BOS convention
// (chat_add_bos), and its assistant-token mask. Throws Error from render_chat for bad role order.
MaskedSequence tokenize_chat(ChatTemplate t, const std::vector<ChatMessage>& messages, const Tokenizer& tokenizer);

// The character spans [start, end) of the assistant turns in render_chat(t, messages, false).
std::vector<std::pair<size_t, size_t>> assistant_spans(ChatTemplate t, const std::vector<ChatMessage>& messages);

// Whether the template's text is encoded with add_bos (all but llama3-instruct, which writes <|begin_of_text|>).
bool chat_add_bos(ChatTemplate t);

}  // namespace draftlab
