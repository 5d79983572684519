#include "core/training/head_data.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/decoding/speculative_decoder.h"
#include "core/training/chat_dataset.h"

namespace draftlab {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

std::vector<int64_t> encode_user_turn(const Tokenizer& tokenizer, const std::string& text, ChatTemplate t) {
  const std::string rendered = t == ChatTemplate::Plain ? text : render_chat(t, {{"user", text}}, true);
  const std::vector<int32_t> ids = tokenizer.encode(rendered, chat_add_bos(t));
  return std::vector<int64_t>(ids.begin(), ids.end());
}

}  // namespace

HeadDataFormat parse_head_data_format(const std::string& name, const std::string& path) {
  if (name == "text") return HeadDataFormat::Text;
  if (name == "chat") return HeadDataFormat::Chat;
  if (name == "tokens") return HeadDataFormat::Tokens;
  if (name == "auto") {
    if (ends_with(path, ".jsonl")) return HeadDataFormat::Chat;
    if (ends_with(path, ".tokens")) return HeadDataFormat::Tokens;
    return HeadDataFormat::Text;
  }
  throw Error::in_file("--data-format", "name", "one of auto, text, chat, tokens", "\"" + name + "\"");
}

const char* head_data_format_name(HeadDataFormat f) {
  switch (f) {
    case HeadDataFormat::Text: return "text";
    case HeadDataFormat::Chat: return "chat";
    case HeadDataFormat::Tokens: return "tokens";
  }
  return "text";
}

TextDataset load_head_data(const std::string& path, HeadDataFormat format, const Tokenizer& tokenizer,
                           int64_t vocab_size, ChatTemplate chat_template, int64_t validation_every) {
  switch (format) {
    case HeadDataFormat::Text: return TextDataset(path, tokenizer, validation_every);
    case HeadDataFormat::Chat: return load_chat_dataset(path, tokenizer, chat_template, validation_every);
    case HeadDataFormat::Tokens: {
      bool masked = false;
      const auto sequences = read_token_lines(path, vocab_size, &masked);
      return split_sequences(sequences, validation_every, masked, path);
    }
  }
  throw Error("load_head_data: unknown format");
}

std::vector<std::vector<int64_t>> prompts_from_file(const std::string& path, const Tokenizer& tokenizer,
                                                    ChatTemplate chat_template) {
  std::ifstream in(path);
  if (!in) throw Error::at(path, "cannot open the prompt file");
  const bool jsonl = ends_with(path, ".jsonl");
  std::vector<std::vector<int64_t>> prompts;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (blank(line)) continue;
    const std::string where = path + ":" + std::to_string(number);
    std::string text = line;
    if (jsonl) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        throw Error::at(where, std::string("not valid JSON (") + e.what() + ")");
      }
      if (!j.is_object() || !j.contains("turns") || !j["turns"].is_array() || j["turns"].empty() ||
          !j["turns"][0].is_string())
        throw Error::in_file(where, "turns", "a list whose first entry is the question (a string)",
                             j.is_object() && j.contains("turns") ? j["turns"].dump().substr(0, 60) : "none");
      text = j["turns"][0].get<std::string>();
    } else if (!text.empty() && text.back() == '\r') {
      text.pop_back();
    }
    auto ids = encode_user_turn(tokenizer, text, chat_template);
    if (ids.empty()) throw Error::at(where, "the prompt encodes to no tokens");
    prompts.push_back(std::move(ids));
  }
  if (prompts.empty()) throw Error::at(path, "no prompts");
  return prompts;
}

void check_corpus_prompts(int64_t prompt_tokens, int64_t validation_every) {
  check(prompt_tokens > 0, "--prompt-tokens: expected a positive number, got " + std::to_string(prompt_tokens));
  check(validation_every >= 2, "--validation-every: expected >= 2, got " + std::to_string(validation_every));
}

std::vector<std::vector<int64_t>> prompts_from_corpus(const std::string& corpus_path, const Tokenizer& tokenizer,
                                                      int64_t prompt_tokens, int64_t max_prompts,
                                                      int64_t validation_every) {
  check_corpus_prompts(prompt_tokens, validation_every);
  const std::vector<std::string> stories = split_stories(read_text_file(corpus_path));
  std::vector<std::vector<int64_t>> prompts;
  for (size_t i = 0; i < stories.size(); ++i) {
    if (static_cast<int64_t>(i % validation_every) == validation_every - 1) continue;  // the validation stories
    if (max_prompts > 0 && static_cast<int64_t>(prompts.size()) >= max_prompts) break;
    const std::vector<int32_t> ids = tokenizer.encode(stories[i], /*add_bos=*/true);
    const size_t keep = std::min(ids.size(), static_cast<size_t>(prompt_tokens) + (tokenizer.bos_id() >= 0 ? 1 : 0));
    prompts.emplace_back(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(keep));
  }
  if (prompts.empty()) throw Error::in_file(corpus_path, "stories", "at least one training story", "none");
  return prompts;
}

std::vector<GeneratedSequence> generate_head_data(const LlamaModel& target,
                                                  const std::vector<std::vector<int64_t>>& prompts,
                                                  const GenerationConfig& config, const GenerationProgress& progress,
                                                  int64_t batch, DataParallel* parallel) {
  check(batch >= 1, "generate_head_data: batch must be >= 1, got " + std::to_string(batch));
  if (parallel) {
    // In rounds: rank r continues prompts [round + r * batch, + batch) of each round of world * batch prompts (a
    // contiguous run: prompt i keeps seed + i), then rank 0 gathers the round. A rank waits for the others at most
    // one round's work, so --dist-timeout need only cover that, not a whole share.
    const int64_t n = static_cast<int64_t>(prompts.size()), world = parallel->world_size();
    std::vector<GeneratedSequence> all;
    int64_t done = 0, generated_here = 0;
    for (int64_t round = 0; round < n; round += world * batch) {
      const int64_t first = std::min(n, round + parallel->rank() * batch), last = std::min(n, first + batch);
      GenerationConfig share = config;
      share.seed = config.seed + static_cast<uint64_t>(first);
      const std::vector<std::vector<int64_t>> mine(prompts.begin() + first, prompts.begin() + last);
      // Sequences travel as one list: prompt length, continuation length, prompt, continuation, ...
      std::vector<int64_t> packed;
      for (const GeneratedSequence& s : generate_head_data(target, mine, share, {}, batch)) {
        packed.push_back(static_cast<int64_t>(s.prompt.size()));
        packed.push_back(static_cast<int64_t>(s.continuation.size()));
        packed.insert(packed.end(), s.prompt.begin(), s.prompt.end());
        packed.insert(packed.end(), s.continuation.begin(), s.continuation.end());
        generated_here += static_cast<int64_t>(s.continuation.size());
      }
      done += last - first;
      if (progress) progress(done, generated_here);
      for (const std::vector<int64_t>& part : parallel->gather_to_main(packed)) {
        for (size_t at = 0; at < part.size();) {
          const auto p = static_cast<size_t>(part[at]), c = static_cast<size_t>(part[at + 1]);
          const auto begin = part.begin() + static_cast<std::ptrdiff_t>(at + 2);
          all.push_back({{begin, begin + static_cast<std::ptrdiff_t>(p)},
                         {begin + static_cast<std::ptrdiff_t>(p), begin + static_cast<std::ptrdiff_t>(p + c)}});
          at += 2 + p + c;
        }
      }
    }
    return all;
  }
  std::vector<GeneratedSequence> out;
  out.reserve(prompts.size());
  int64_t generated = 0;
  std::vector<NoDraftStrategy> no_draft(static_cast<size_t>(batch));
  for (size_t i = 0; i < prompts.size();) {
    const size_t n = std::min(prompts.size() - i, static_cast<size_t>(batch));
    // Each prompt its own stream (config.seed + i): a prompt's text does not depend on the others.
    std::vector<GenerationResult> results;
    if (n == 1) {
      GenerationConfig c = config;
      c.seed = config.seed + i;
      results.push_back(generate_vanilla(target, prompts[i], c));
    } else {
      std::vector<BatchSequence> sequences;
      std::vector<DraftStrategy*> strategies;
      for (size_t k = 0; k < n; ++k) {
        sequences.push_back({prompts[i + k], config.seed + i + k});
        strategies.push_back(&no_draft[k]);
      }
      for (auto& r : SpeculativeDecoder(target, strategies).generate(sequences, config).sequences)
        results.push_back(std::move(r));
    }
    for (size_t k = 0; k < n; ++k) {
      generated += static_cast<int64_t>(results[k].tokens.size());
      out.push_back({prompts[i + k], std::move(results[k].tokens)});
    }
    i += n;
    if (progress) progress(static_cast<int64_t>(i), generated);
  }
  return out;
}

void write_head_data(const std::string& path, HeadDataFormat format, const std::vector<GeneratedSequence>& sequences,
                     const Tokenizer& tokenizer) {
  check(format != HeadDataFormat::Chat, "--format: gen-head-data writes tokens or text, not chat");
  std::string bytes;
  for (const GeneratedSequence& s : sequences) {
    if (format == HeadDataFormat::Tokens) {
      bytes += format_token_line(s.prompt, s.continuation) + "\n";
    } else {
      std::vector<int32_t> ids(s.prompt.begin(), s.prompt.end());
      ids.insert(ids.end(), s.continuation.begin(), s.continuation.end());
      // Blank lines inside a story would split it in two when read back: drop them, a story is one block.
      std::string story;
      for (const std::string& part : split_stories(tokenizer.decode(ids))) story += (story.empty() ? "" : "\n") + part;
      if (!story.empty()) bytes += story + "\n\n";
    }
  }
  write_file_atomically(path, bytes);
}

}  // namespace draftlab
