// Chat templates: a conversation (system / user / assistant messages) to the prompt text a chat model expects,
// exactly as the official EAGLE evaluation scripts build it (SafeAILab/EAGLE eagle/evaluation/
// gen_ea_answer_{vicuna,llama2chat,llama3chat}.py, which use FastChat's fastchat/conversation.py for Vicuna and
// LLaMA-2-Chat and the Hugging Face chat template for LLaMA-3-Instruct).
//
// Messages: an optional "system" message first, then "user" and "assistant" alternating, starting with "user".
// Without a system message each template uses the system prompt the EAGLE scripts use
// (default_system_message()); an explicit system message replaces it, and an empty one means "no system prompt".
//
// BOS and the tokenizer:
//   plain, vicuna, llama2-chat: the text does NOT start with "<s>"; encode it with add_bos = true (the EAGLE scripts
//     call tokenizer([prompt]), which prepends BOS). Vicuna and LLaMA-2-Chat texts of multi-turn conversations
//     contain the literal strings "</s>" (and "<s>" for LLaMA-2), which Hugging Face's tokenizer turns into the
//     EOS/BOS ids - a tokenizer that encodes them as plain characters gives different ids.
//   llama3-instruct: the text starts with "<|begin_of_text|>" (the HF template writes bos_token itself); encode it
//     with add_bos = false, as the EAGLE script does (add_special_tokens=False). The header tokens
//     (<|start_header_id|>, <|end_header_id|>, <|eot_id|>) must be encoded as their special ids.
#pragma once

#include <string>
#include <vector>

namespace draftlab {

enum class ChatTemplate {
  // Message contents joined by "\n" (system included when given), nothing else: for base models such as the
  // tiny llama2.c models, which were never trained on a chat format. add_generation_prompt adds nothing.
  Plain,
  // FastChat "vicuna_v1.1": "<system> USER: <q1> ASSISTANT: <a1></s>USER: <q2> ASSISTANT:".
  VicunaV11,
  // FastChat "llama-2" with the EAGLE script's system prompt and its trailing space after the last "[/INST]":
  // "[INST] <<SYS>>\n<system>\n<</SYS>>\n\n<q1> [/INST] <a1> </s><s>[INST] <q2> [/INST] ".
  Llama2Chat,
  // Meta-Llama-3-8B-Instruct's HF chat template (contents trimmed of surrounding whitespace):
  // "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n<system><|eot_id|>"
  // "<|start_header_id|>user<|end_header_id|>\n\n<q1><|eot_id|>...<|start_header_id|>assistant<|end_header_id|>\n\n".
  // (Llama 3.1's own template adds a "Cutting Knowledge Date" header to the system message; EAGLE's evaluation
  // of LLaMA3-Instruct in the EAGLE-2 paper used Llama 3, this template.)
  Llama3Instruct,
};

// "plain", "vicuna", "llama2-chat", "llama3-instruct". Unknown names throw Error listing the valid ones.
ChatTemplate parse_chat_template(const std::string& name);
const char* chat_template_name(ChatTemplate t);

// The system prompt used when the conversation has none: FastChat's Vicuna v1.1 prompt; for LLaMA-2-Chat and
// LLaMA-3-Instruct the Llama-2 default system prompt that the EAGLE scripts set explicitly; "" for Plain.
const std::string& default_system_message(ChatTemplate t);

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// The prompt text for `messages`. add_generation_prompt appends the assistant's turn opener (the last message must
// then be a user message) so the model continues with the answer. Throws Error for unknown roles, a misplaced
// system message or roles that do not alternate.
std::string render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages, bool add_generation_prompt);

}  // namespace draftlab
