// Hugging Face tokenizer.json (and its tokenizer_config.json) read into a BpeSpec: load_hf_tokenizer_json, with
// errors naming the file, the field and what was expected.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/text/tokenizer.h"
#include "core/text/tokenizer_bpe_internal.h"

namespace draftlab {

// ================================================================================================
// Front-end: Hugging Face tokenizer.json
// ================================================================================================

namespace {

using nlohmann::json;

// Reads the fields of one JSON file; every error names the file, the field path and what was expected.
class JsonFields {
 public:
  explicit JsonFields(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }

  [[noreturn]] void fail(const std::string& field, const std::string& expected, const json* got) const {
    throw Error::in_file(file_, field, expected, describe(got));
  }

  // obj[key] as an object / array / string / ...; a missing key or a null is an error unless optional.
  const json* find(const json& obj, const char* key) const {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  const json& object(const json& obj, const char* key, const std::string& field) const {
    const json* v = find(obj, key);
    if (!v || !v->is_object()) fail(field, "an object", v);
    return *v;
  }
  const json& array(const json& obj, const char* key, const std::string& field) const {
    const json* v = find(obj, key);
    if (!v || !v->is_array()) fail(field, "an array", v);
    return *v;
  }
  std::string string(const json& obj, const char* key, const std::string& field) const {
    const json* v = find(obj, key);
    if (!v || !v->is_string()) fail(field, "a string", v);
    return v->get<std::string>();
  }
  bool boolean(const json& obj, const char* key, const std::string& field, bool default_value) const {
    const json* v = find(obj, key);
    if (!v) return default_value;
    if (!v->is_boolean()) fail(field, "true or false", v);
    return v->get<bool>();
  }
  int64_t integer(const json& obj, const char* key, const std::string& field) const {
    const json* v = find(obj, key);
    if (!v || !v->is_number_integer()) fail(field, "an integer", v);
    return v->get<int64_t>();
  }
  // "type" of a component object, e.g. pre_tokenizer.type.
  std::string type(const json& component, const std::string& field) const {
    if (!component.is_object()) fail(field, "an object", &component);
    return string(component, "type", field + ".type");
  }

  static std::string describe(const json* v) {
    if (!v) return "nothing";
    if (v->is_string()) {
      std::string s = v->get<std::string>();
      return s.size() > 60 ? "\"" + s.substr(0, 60) + "...\"" : "\"" + s + "\"";
    }
    std::string dumped = v->dump();
    if (dumped.size() > 60) dumped = dumped.substr(0, 60) + "...";
    return std::string(v->type_name()) + " " + dumped;
  }

 private:
  std::string file_;
};

json parse_json_file(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error::at(path, std::string("not valid JSON (") + e.what() + ")");
  }
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// ---- model ----

void read_bpe_model(const JsonFields& in, const json& root, BpeSpec& spec,
                    std::vector<std::pair<std::string, int64_t>>& vocab) {
  const json& model = in.object(root, "model", "model");
  const std::string type = in.find(model, "type") ? in.string(model, "type", "model.type") : "BPE";
  if (type != "BPE") in.fail("model.type", "BPE", in.find(model, "type"));

  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = in.find(model, affix);
    if (v && !(v->is_string() && v->get<std::string>().empty())) {
      in.fail(std::string("model.") + affix, "null (word-piece affixes are not supported)", v);
    }
  }
  if (const json* dropout = in.find(model, "dropout")) {
    // BPE dropout makes encoding random; speculative decoding needs the deterministic tokenization.
    if (!dropout->is_number() || dropout->get<double>() != 0.0) in.fail("model.dropout", "null or 0", dropout);
  }

  const json& vocab_json = in.object(model, "vocab", "model.vocab");
  vocab.reserve(vocab_json.size());
  for (auto it = vocab_json.begin(); it != vocab_json.end(); ++it) {
    const std::string field = "model.vocab[\"" + it.key() + "\"]";
    if (!it->is_number_integer()) in.fail(field, "a token id", &*it);
    const int64_t id = it->get<int64_t>();
    if (id < 0 || id >= (int64_t{1} << 24)) in.fail(field, "a token id in [0, 16777216)", &*it);
    vocab.emplace_back(it.key(), id);
  }

  spec.merges_field = "model.merges";
  const json& merges = in.array(model, "merges", "model.merges");
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string field = "model.merges[" + std::to_string(i) + "]";
    const json& m = merges[i];
    if (m.is_string()) {
      // Older files write "left right"; Hugging Face requires exactly one space.
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == s.size() || s.find(' ', space + 1) != std::string::npos) {
        in.fail(field, "\"left right\" (two pieces separated by one space)", &m);
      }
      spec.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      in.fail(field, "\"left right\" or [\"left\", \"right\"]", &m);
    }
  }

  spec.byte_fallback = in.boolean(model, "byte_fallback", "model.byte_fallback", false);
  spec.fuse_unk = in.boolean(model, "fuse_unk", "model.fuse_unk", false);
  spec.ignore_merges = in.boolean(model, "ignore_merges", "model.ignore_merges", false);
}

// ---- normalizer ----

void read_normalizer(const JsonFields& in, const json& node, const std::string& field, BpeSpec& spec) {
  const std::string type = in.type(node, field);
  if (type == "Sequence") {
    const json& steps = in.array(node, "normalizers", field + ".normalizers");
    for (size_t i = 0; i < steps.size(); ++i) {
      read_normalizer(in, steps[i], field + ".normalizers[" + std::to_string(i) + "]", spec);
    }
  } else if (type == "Prepend") {
    spec.normalizer.push_back({NormalizerStep::Kind::kPrepend, "", in.string(node, "prepend", field + ".prepend")});
  } else if (type == "Replace") {
    const json& pattern = in.object(node, "pattern", field + ".pattern");
    const json* literal = in.find(pattern, "String");
    if (!literal || !literal->is_string() || literal->get<std::string>().empty()) {
      in.fail(field + ".pattern", "{\"String\": non-empty text} (regex patterns are not supported)", &pattern);
    }
    spec.normalizer.push_back(
        {NormalizerStep::Kind::kReplace, literal->get<std::string>(), in.string(node, "content", field + ".content")});
  } else {
    in.fail(field + ".type", "Sequence, Prepend or Replace (the normalizers implemented here)", in.find(node, "type"));
  }
}

// ---- pre-tokenizer ----

PrependScheme read_prepend_scheme(const JsonFields& in, const json& node, const std::string& field) {
  if (in.find(node, "prepend_scheme")) {
    const std::string scheme = in.string(node, "prepend_scheme", field + ".prepend_scheme");
    if (scheme == "always") return PrependScheme::kAlways;
    if (scheme == "first") return PrependScheme::kFirst;
    if (scheme == "never") return PrependScheme::kNever;
    in.fail(field + ".prepend_scheme", "always, first or never", in.find(node, "prepend_scheme"));
  }
  // Files from before tokenizers 0.14 say add_prefix_space instead.
  return in.boolean(node, "add_prefix_space", field + ".add_prefix_space", true) ? PrependScheme::kAlways
                                                                                  : PrependScheme::kNever;
}

void read_pre_tokenizer(const JsonFields& in, const json& node, const std::string& field, BpeSpec& spec) {
  const std::string type = in.type(node, field);
  PreTokenizerStep step;
  if (type == "Sequence") {
    const json& steps = in.array(node, "pretokenizers", field + ".pretokenizers");
    for (size_t i = 0; i < steps.size(); ++i) {
      read_pre_tokenizer(in, steps[i], field + ".pretokenizers[" + std::to_string(i) + "]", spec);
    }
    return;
  } else if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = in.boolean(node, "add_prefix_space", field + ".add_prefix_space", true);
    step.use_regex = in.boolean(node, "use_regex", field + ".use_regex", true);
  } else if (type == "Metaspace") {
    step.kind = PreTokenizerStep::Kind::kMetaspace;
    step.replacement = in.string(node, "replacement", field + ".replacement");
    if (step.replacement.empty()) in.fail(field + ".replacement", "a non-empty string", in.find(node, "replacement"));
    step.prepend_scheme = read_prepend_scheme(in, node, field);
    step.split = in.boolean(node, "split", field + ".split", true);
  } else if (type == "Split") {
    step.kind = PreTokenizerStep::Kind::kSplit;
    const json& pattern = in.object(node, "pattern", field + ".pattern");
    const json* regex = in.find(pattern, "Regex");
    const std::string expected = "{\"Regex\": the GPT-2 or Llama-3 split regex} (the patterns implemented here)";
    if (!regex || !regex->is_string()) in.fail(field + ".pattern", expected, &pattern);
    const std::string text = regex->get<std::string>();
    if (text == kGpt2Regex) {
      step.pattern = SplitPattern::kGpt2;
    } else if (text == kLlama3Regex) {
      step.pattern = SplitPattern::kLlama3;
    } else {
      in.fail(field + ".pattern.Regex", "the GPT-2 or Llama-3 split regex (the patterns implemented here)", regex);
    }
    const std::string behavior = in.string(node, "behavior", field + ".behavior");
    if (behavior != "Isolated") in.fail(field + ".behavior", "Isolated", in.find(node, "behavior"));
    if (in.boolean(node, "invert", field + ".invert", false)) in.fail(field + ".invert", "false", in.find(node, "invert"));
  } else {
    in.fail(field + ".type", "Sequence, ByteLevel, Metaspace or Split (the pre-tokenizers implemented here)",
            in.find(node, "type"));
  }
  spec.pre_tokenizer.push_back(step);
}

// ---- decoder ----

void read_decoder(const JsonFields& in, const json& node, const std::string& field, BpeSpec& spec) {
  const std::string type = in.type(node, field);
  DecoderSpec& decoder = spec.decoder;
  if (type == "Sequence") {
    const json& steps = in.array(node, "decoders", field + ".decoders");
    for (size_t i = 0; i < steps.size(); ++i) {
      read_decoder(in, steps[i], field + ".decoders[" + std::to_string(i) + "]", spec);
    }
  } else if (type == "ByteLevel") {
    decoder.byte_level = true;
  } else if (type == "ByteFallback") {
    decoder.byte_fallback = true;
  } else if (type == "Fuse") {
    // Joins the pieces into one string: token_bytes output is concatenated anyway.
  } else if (type == "Replace") {
    const json& pattern = in.object(node, "pattern", field + ".pattern");
    const json* literal = in.find(pattern, "String");
    if (!literal || !literal->is_string() || literal->get<std::string>().empty()) {
      in.fail(field + ".pattern", "{\"String\": non-empty text} (regex patterns are not supported)", &pattern);
    }
    decoder.replacements.emplace_back(literal->get<std::string>(), in.string(node, "content", field + ".content"));
  } else if (type == "Strip") {
    // Llama-2 strips the one space that the normalizer prepended: SentencePiece's dummy prefix.
    const std::string content = in.string(node, "content", field + ".content");
    if (content != " ") in.fail(field + ".content", "\" \"", in.find(node, "content"));
    const int64_t start = in.integer(node, "start", field + ".start");
    const int64_t stop = in.integer(node, "stop", field + ".stop");
    if (start < 0 || start > 1) in.fail(field + ".start", "0 or 1", in.find(node, "start"));
    if (stop != 0) in.fail(field + ".stop", "0", in.find(node, "stop"));
    decoder.strip_space_after_bos = decoder.strip_space_after_bos || start == 1;
  } else if (type == "Metaspace") {
    decoder.replacements.emplace_back(in.string(node, "replacement", field + ".replacement"), " ");
    decoder.strip_space_after_bos = read_prepend_scheme(in, node, field) != PrependScheme::kNever;
  } else {
    in.fail(field + ".type", "Sequence, ByteLevel, ByteFallback, Fuse, Replace, Strip or Metaspace",
            in.find(node, "type"));
  }
}

// ---- added tokens, special token ids ----

void read_added_tokens(const JsonFields& in, const json& root, BpeSpec& spec, std::vector<bool>& special) {
  const json* list = in.find(root, "added_tokens");
  if (!list) return;
  if (!list->is_array()) in.fail("added_tokens", "an array", list);
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    const json& entry = (*list)[i];
    if (!entry.is_object()) in.fail(field, "an object", &entry);
    AddedToken token;
    const int64_t id = in.integer(entry, "id", field + ".id");
    if (id < 0 || id >= (int64_t{1} << 24)) in.fail(field + ".id", "a token id in [0, 16777216)", in.find(entry, "id"));
    token.id = static_cast<int32_t>(id);
    token.content = in.string(entry, "content", field + ".content");
    if (token.content.empty()) in.fail(field + ".content", "a non-empty string", in.find(entry, "content"));
    token.lstrip = in.boolean(entry, "lstrip", field + ".lstrip", false);
    token.rstrip = in.boolean(entry, "rstrip", field + ".rstrip", false);
    token.single_word = in.boolean(entry, "single_word", field + ".single_word", false);
    special.push_back(in.boolean(entry, "special", field + ".special", false));
    spec.added_tokens.push_back(std::move(token));
  }
}

int32_t find_piece(const BpeSpec& spec, const std::string& text) {
  for (const AddedToken& token : spec.added_tokens) {
    if (token.content == text) return token.id;
  }
  const auto it = std::find(spec.pieces.begin(), spec.pieces.end(), text);
  return it == spec.pieces.end() ? -1 : static_cast<int32_t>(it - spec.pieces.begin());
}

// BOS / EOS: tokenizer_config.json's bos_token / eos_token when it names them (a string, or an AddedToken object
// with "content"; null means none), else the usual names.
void read_special_ids(const std::string& tokenizer_json_path, BpeSpec& spec) {
  const std::vector<std::string> bos_names = {"<s>", "<|begin_of_text|>", "<|endoftext|>"};
  const std::vector<std::string> eos_names = {"</s>", "<|end_of_text|>", "<|eot_id|>", "<|endoftext|>"};
  const auto by_name = [&](const std::vector<std::string>& names) {
    for (const std::string& name : names) {
      const int32_t id = find_piece(spec, name);
      if (id >= 0) return id;
    }
    return int32_t{-1};
  };
  spec.bos_id = by_name(bos_names);
  spec.eos_id = by_name(eos_names);

  const std::string config_path = directory_of(tokenizer_json_path) + "/tokenizer_config.json";
  if (!is_file(config_path)) return;
  const json config = parse_json_file(config_path);
  const JsonFields in(config_path);
  if (!config.is_object()) in.fail("(top level)", "an object", &config);
  for (const auto& [key, id] : {std::pair<const char*, int32_t*>{"bos_token", &spec.bos_id},
                                std::pair<const char*, int32_t*>{"eos_token", &spec.eos_id}}) {
    const auto it = config.find(key);
    if (it == config.end()) continue;
    if (it->is_null()) {
      *id = -1;
      continue;
    }
    std::string name;
    if (it->is_string()) {
      name = it->get<std::string>();
    } else if (it->is_object()) {
      name = in.string(*it, "content", std::string(key) + ".content");
    } else {
      in.fail(key, "a token string, {\"content\": token} or null", &*it);
    }
    *id = find_piece(spec, name);
    if (*id < 0) in.fail(key, "a token of " + tokenizer_json_path, &*it);
  }
}

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& path_or_dir) {
  const std::string path = is_directory(path_or_dir) ? path_or_dir + "/tokenizer.json" : path_or_dir;
  const json root = parse_json_file(path);
  const JsonFields in(path);
  if (!root.is_object()) in.fail("(top level)", "an object", &root);

  BpeSpec spec;
  spec.source = path;
  spec.vocab_field = "model.vocab";
  std::vector<std::pair<std::string, int64_t>> vocab;
  read_bpe_model(in, root, spec, vocab);
  std::vector<bool> added_special;
  read_added_tokens(in, root, spec, added_special);

  // Ids: the model's vocabulary, plus added tokens (Llama-3's specials sit above the model's 128000 pieces).
  int64_t size = 0;
  for (const auto& entry : vocab) size = std::max(size, entry.second + 1);
  for (const AddedToken& token : spec.added_tokens) size = std::max<int64_t>(size, token.id + 1);
  spec.pieces.assign(size, "");
  spec.roles.assign(size, TokenRole::kUnused);
  spec.in_model.assign(size, false);
  for (const auto& [piece, id] : vocab) {
    if (spec.in_model[id]) {
      throw Error::in_file(path, "model.vocab[\"" + piece + "\"]", "an id no other piece has",
                           std::to_string(id) + ", the id of \"" + spec.pieces[id] + "\" too");
    }
    spec.pieces[id] = piece;
    spec.roles[id] = TokenRole::kModel;
    spec.in_model[id] = true;
  }
  for (size_t i = 0; i < spec.added_tokens.size(); ++i) {
    const AddedToken& token = spec.added_tokens[i];
    // An added token usually repeats a vocabulary entry; where it does not, its content names the id.
    if (!spec.in_model[token.id]) spec.pieces[token.id] = token.content;
    if (added_special[i]) {
      spec.roles[token.id] = TokenRole::kSpecial;
    } else if (!spec.in_model[token.id]) {
      spec.roles[token.id] = TokenRole::kVerbatim;
    }
  }
  if (const json* unk = in.find(in.object(root, "model", "model"), "unk_token")) {
    if (!unk->is_string()) in.fail("model.unk_token", "a token string or null", unk);
    const std::string name = unk->get<std::string>();
    for (size_t id = 0; id < spec.pieces.size() && spec.unk_id < 0; ++id) {
      if (spec.in_model[id] && spec.pieces[id] == name) spec.unk_id = static_cast<int32_t>(id);
    }
    if (spec.unk_id < 0) in.fail("model.unk_token", "a piece of model.vocab", unk);
  }

  if (const json* normalizer = in.find(root, "normalizer")) read_normalizer(in, *normalizer, "normalizer", spec);
  if (const json* pre = in.find(root, "pre_tokenizer")) read_pre_tokenizer(in, *pre, "pre_tokenizer", spec);
  // Without a decoder the pieces are their own text.
  if (const json* decoder = in.find(root, "decoder")) read_decoder(in, *decoder, "decoder", spec);

  read_special_ids(path, spec);
  return std::make_unique<BpeTokenizer>(std::move(spec));
}

}  // namespace draftlab
