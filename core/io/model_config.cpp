#include "core/io/model_config.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"

namespace draftlab {

namespace {

using nlohmann::json;

// A JSON value for an error message: its type and (shortened) text, e.g. `string "4096"`.
std::string describe(const json& v) {
  std::string text = v.dump();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return std::string(v.type_name()) + " " + text;
}

// Reads config.json keys with typed errors. A key that is absent or null counts as "not given",
// as in Hugging Face's PretrainedConfig.
class ConfigReader {
 public:
  ConfigReader(const json& j, const std::string& source) : j_(j), source_(source) {}

  bool has(const std::string& key) const {
    auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }

  int64_t required_int(const std::string& key) const {
    if (!has(key)) throw Error::in_file(source_, key, "an integer (required key)", "no such key");
    return as_int(j_.at(key), key);
  }
  int64_t optional_int(const std::string& key, int64_t fallback) const {
    return has(key) ? as_int(j_.at(key), key) : fallback;
  }
  double optional_double(const std::string& key, double fallback) const {
    return has(key) ? as_double(j_.at(key), key) : fallback;
  }
  bool optional_bool(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_boolean()) throw Error::in_file(source_, key, "true or false", describe(v));
    return v.get<bool>();
  }
  std::string optional_string(const std::string& key) const {
    if (!has(key)) return "";
    const json& v = j_.at(key);
    if (!v.is_string()) throw Error::in_file(source_, key, "a string", describe(v));
    return v.get<std::string>();
  }

  int64_t as_int(const json& v, const std::string& key) const {
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw Error::in_file(source_, key, "an integer that fits in 64 bits", describe(v));
      return static_cast<int64_t>(v.get<uint64_t>());
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    throw Error::in_file(source_, key, "an integer", describe(v));
  }
  double as_double(const json& v, const std::string& key) const {
    if (!v.is_number()) throw Error::in_file(source_, key, "a number", describe(v));
    return v.get<double>();
  }
  int32_t as_token_id(const json& v, const std::string& key) const {
    const int64_t id = as_int(v, key);
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      throw Error::in_file(source_, key, "a token id in [0, 2^31)", describe(v));
    return static_cast<int32_t>(id);
  }

  const json& at(const std::string& key) const { return j_.at(key); }
  const std::string& source() const { return source_; }

 private:
  const json& j_;
  const std::string& source_;
};

// rope_scaling: null, {"rope_type"/"type": "llama3", factor, low_freq_factor, high_freq_factor,
// original_max_position_embeddings} or {"type": "linear", factor}. Anything else would silently change
// positions, so it is refused.
RopeScaling parse_rope_scaling(const json& v, const std::string& source) {
  RopeScaling scaling;
  if (v.is_null()) return scaling;
  if (!v.is_object()) throw Error::in_file(source, "rope_scaling", "null or an object", describe(v));
  ConfigReader r(v, source);
  // Newer transformers write "rope_type", older ones "type"; either names the scheme.
  std::string type = r.optional_string("rope_type");
  if (type.empty()) type = r.optional_string("type");
  if (type.empty() || type == "default") return scaling;  // "default" is plain RoPE

  if (type == "llama3") {
    for (const char* key : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
      if (!r.has(key)) throw Error::in_file(source, std::string("rope_scaling.") + key, "a number (required for llama3)", "no such key");
    scaling.type = "llama3";
    scaling.factor = r.as_double(v.at("factor"), "rope_scaling.factor");
    scaling.low_freq_factor = r.as_double(v.at("low_freq_factor"), "rope_scaling.low_freq_factor");
    scaling.high_freq_factor = r.as_double(v.at("high_freq_factor"), "rope_scaling.high_freq_factor");
    scaling.original_max_position_embeddings =
        r.as_int(v.at("original_max_position_embeddings"), "rope_scaling.original_max_position_embeddings");
    return scaling;
  }
  if (type == "linear") {
    if (!r.has("factor")) throw Error::in_file(source, "rope_scaling.factor", "a number (required for linear)", "no such key");
    scaling.type = "linear";
    scaling.factor = r.as_double(v.at("factor"), "rope_scaling.factor");
    return scaling;
  }
  throw Error::in_file(source, "rope_scaling.rope_type", "\"llama3\", \"linear\" or null (the types draftlab implements)",
                       "\"" + type + "\"");
}

}  // namespace

ModelConfig parse_hf_config(const json& j, const std::string& source) {
  if (!j.is_object()) throw Error::in_file(source, "config", "a JSON object", describe(j));
  ConfigReader r(j, source);

  // Only architectures whose weights and forward are exactly Llama's, or Llama's with a mixture-of-experts MLP
  // (Mixtral). Mistral's config uses the same keys (its sliding_window never triggers below 4096 tokens of context
  // and is ignored here).
  const std::string model_type = r.optional_string("model_type");
  if (!model_type.empty() && model_type != "llama" && model_type != "mistral" && model_type != "mixtral")
    throw Error::in_file(source, "model_type", "\"llama\", \"mistral\" or \"mixtral\"", "\"" + model_type + "\"");
  const std::string act = r.optional_string("hidden_act");
  if (!act.empty() && act != "silu") throw Error::in_file(source, "hidden_act", "\"silu\"", "\"" + act + "\"");
  if (r.optional_bool("attention_bias", false))
    throw Error::in_file(source, "attention_bias", "false (draftlab's Llama has no attention biases)", "true");
  if (r.optional_bool("mlp_bias", false))
    throw Error::in_file(source, "mlp_bias", "false (draftlab's Llama has no MLP biases)", "true");

  ModelConfig c;
  c.hidden_size = r.required_int("hidden_size");
  c.intermediate_size = r.required_int("intermediate_size");
  c.num_hidden_layers = r.required_int("num_hidden_layers");
  c.num_attention_heads = r.required_int("num_attention_heads");
  c.vocab_size = r.required_int("vocab_size");
  c.num_key_value_heads = r.optional_int("num_key_value_heads", c.num_attention_heads);
  // Llama 3.2 and others give head_dim explicitly (it need not be hidden_size / heads).
  c.head_dim = r.optional_int("head_dim", c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0);

  // Absent keys take transformers' LlamaConfig defaults, so a file means what it means to Hugging Face.
  c.rms_norm_eps = r.optional_double("rms_norm_eps", 1e-6);
  c.rope_theta = r.optional_double("rope_theta", 10000.0);
  c.max_position_embeddings = r.optional_int("max_position_embeddings", 2048);
  c.tie_word_embeddings = r.optional_bool("tie_word_embeddings", false);
  if (r.has("rope_scaling")) c.rope_scaling = parse_rope_scaling(j.at("rope_scaling"), source);
  if (model_type == "mixtral") {  // MixtralConfig's defaults
    c.num_local_experts = r.optional_int("num_local_experts", 8);
    c.num_experts_per_tok = r.optional_int("num_experts_per_tok", 2);
    c.router_aux_loss_coef = r.optional_double("router_aux_loss_coef", 0.001);
    if (c.num_local_experts < 1)
      throw Error::in_file(source, "num_local_experts", "a positive integer (model_type \"mixtral\")",
                           std::to_string(c.num_local_experts));
  }

  if (r.has("bos_token_id")) c.bos_token_id = r.as_token_id(j.at("bos_token_id"), "bos_token_id");
  if (r.has("eos_token_id")) {
    // One id (Llama 2) or a list (Llama 3.1 Instruct stops on any of <|end_of_text|>, <|eom_id|>, <|eot_id|>).
    const json& eos = j.at("eos_token_id");
    c.eos_token_ids.clear();
    if (eos.is_array()) {
      if (eos.empty()) throw Error::in_file(source, "eos_token_id", "an id or a non-empty list of ids", describe(eos));
      for (const json& id : eos) c.eos_token_ids.push_back(r.as_token_id(id, "eos_token_id"));
    } else {
      c.eos_token_ids.push_back(r.as_token_id(eos, "eos_token_id"));
    }
  }

  if (r.has("pard_token")) c.pard_token = r.as_token_id(j.at("pard_token"), "pard_token");

  c.validate(source);
  return c;
}

ModelConfig load_hf_config(const std::string& path) {
  const std::string file = is_directory(path) ? path + "/config.json" : path;
  json j;
  try {
    j = json::parse(read_text_file(file));
  } catch (const json::exception& e) {
    throw Error::in_file(file, "config", "valid JSON", e.what());
  }
  return parse_hf_config(j, file);
}

void ModelConfig::validate(const std::string& source) const {
  auto positive = [&](const char* field, int64_t v) {
    if (v <= 0) throw Error::in_file(source, field, "a positive integer", std::to_string(v));
  };
  positive("hidden_size", hidden_size);
  positive("intermediate_size", intermediate_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("num_key_value_heads", num_key_value_heads);
  positive("head_dim", head_dim);
  positive("vocab_size", vocab_size);
  positive("max_position_embeddings", max_position_embeddings);

  if (num_attention_heads % num_key_value_heads != 0)
    throw Error::in_file(source, "num_key_value_heads",
                         "a divisor of num_attention_heads (" + std::to_string(num_attention_heads) + ")",
                         std::to_string(num_key_value_heads));
  // RoPE rotates pairs of channels, so a head needs an even number of them.
  if (head_dim % 2 != 0) throw Error::in_file(source, "head_dim", "an even number (RoPE rotates pairs)", std::to_string(head_dim));
  if (!(rms_norm_eps > 0)) throw Error::in_file(source, "rms_norm_eps", "a positive number", std::to_string(rms_norm_eps));
  if (!(rope_theta > 0)) throw Error::in_file(source, "rope_theta", "a positive number", std::to_string(rope_theta));
  if (pard_token < -1 || pard_token >= vocab_size)
    throw Error::in_file(source, "pard_token", "an id in [0, vocab_size = " + std::to_string(vocab_size) + ")",
                         std::to_string(pard_token));
  if (eos_token_ids.empty()) throw Error::in_file(source, "eos_token_id", "at least one id", "none");
  if (num_local_experts < 0)
    throw Error::in_file(source, "num_local_experts", "a positive integer (or 0: dense)", std::to_string(num_local_experts));
  if (mixture_of_experts() && (num_experts_per_tok < 1 || num_experts_per_tok > num_local_experts))
    throw Error::in_file(source, "num_experts_per_tok", "1.." + std::to_string(num_local_experts) + " (num_local_experts)",
                         std::to_string(num_experts_per_tok));

  if (rope_scaling.type == "llama3" || rope_scaling.type == "linear") {
    if (!(rope_scaling.factor > 0))
      throw Error::in_file(source, "rope_scaling.factor", "a positive number", std::to_string(rope_scaling.factor));
  }
  if (rope_scaling.type == "llama3") {
    // The llama3 scheme interpolates between the two wavelength thresholds; they must be ordered.
    if (!(rope_scaling.low_freq_factor > 0) || !(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor))
      throw Error::in_file(source, "rope_scaling.high_freq_factor",
                           "greater than low_freq_factor (" + std::to_string(rope_scaling.low_freq_factor) + ") > 0",
                           std::to_string(rope_scaling.high_freq_factor));
    if (rope_scaling.original_max_position_embeddings <= 0)
      throw Error::in_file(source, "rope_scaling.original_max_position_embeddings", "a positive integer",
                           std::to_string(rope_scaling.original_max_position_embeddings));
  } else if (!rope_scaling.type.empty() && rope_scaling.type != "linear") {
    throw Error::in_file(source, "rope_scaling.rope_type", "\"llama3\", \"linear\" or none", "\"" + rope_scaling.type + "\"");
  }
}

json ModelConfig::to_hf_json(const std::string& torch_dtype) const {
  json j;
  j["architectures"] = json::array({mixture_of_experts() ? "MixtralForCausalLM" : "LlamaForCausalLM"});
  j["model_type"] = mixture_of_experts() ? "mixtral" : "llama";
  if (mixture_of_experts()) {
    j["num_local_experts"] = num_local_experts;
    j["num_experts_per_tok"] = num_experts_per_tok;
    j["router_aux_loss_coef"] = router_aux_loss_coef;
    j["output_router_logits"] = false;
  }
  j["torch_dtype"] = torch_dtype;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  j["max_position_embeddings"] = max_position_embeddings;
  j["vocab_size"] = vocab_size;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["bos_token_id"] = bos_token_id;
  if (eos_token_ids.size() == 1)
    j["eos_token_id"] = eos_token_ids[0];
  else
    j["eos_token_id"] = eos_token_ids;

  if (pard_token >= 0) {  // as PARD's trainer writes it
    j["pard_token"] = pard_token;
    j["spd_type"] = "pard";
  }

  if (rope_scaling.type.empty()) {
    j["rope_scaling"] = nullptr;
  } else if (rope_scaling.type == "linear") {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", rope_scaling.factor}};
  } else {
    j["rope_scaling"] = {{"rope_type", rope_scaling.type},
                         {"factor", rope_scaling.factor},
                         {"low_freq_factor", rope_scaling.low_freq_factor},
                         {"high_freq_factor", rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", rope_scaling.original_max_position_embeddings}};
  }
  return j;
}

}  // namespace draftlab
