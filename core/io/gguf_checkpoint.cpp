#include "core/io/gguf_checkpoint.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <regex>

#include "core/base/error.h"

namespace draftlab {

namespace {

constexpr const char* kArch = "llama";

// GGUF stores epsilons and RoPE bases as float32. The float nearest 1e-5 is 9.99999974738e-06; the shortest
// decimal that rounds to the same float (1e-05) is what the source checkpoint said, so that is the value kept.
double shortest_decimal(double value) {
  const float f = static_cast<float>(value);
  if (static_cast<double>(f) != value) return value;  // not a float32 value: keep it as is
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtof(text, nullptr) == f) return std::strtod(text, nullptr);
  }
  return value;
}

double get_float(const GgufFile& g, const std::string& key, double fallback, bool required) {
  const auto it = g.metadata.find(key);
  if (it == g.metadata.end()) {
    if (required) throw Error::in_file(g.path, key, "a float", "no such key");
    return fallback;
  }
  const auto* d = std::get_if<double>(&it->second.v);
  if (!d) throw Error::in_file(g.path, key, "a float", "another type");
  return shortest_decimal(*d);
}

int64_t get_int_or(const GgufFile& g, const std::string& key, int64_t fallback) {
  return g.has(key) ? g.get_int(key) : fallback;
}

int32_t token_id(const GgufFile& g, const std::string& key) {
  const int64_t id = g.get_int(key);
  if (id < 0 || id > INT32_MAX) throw Error::in_file(g.path, key, "a token id", std::to_string(id));
  return static_cast<int32_t>(id);
}

}  // namespace

std::string gguf_tensor_name(const std::string& hf) {
  static const std::pair<const char*, const char*> kGlobal[] = {{"model.embed_tokens.weight", "token_embd.weight"},
                                                                {"model.norm.weight", "output_norm.weight"},
                                                                {"lm_head.weight", "output.weight"}};
  for (const auto& [from, to] : kGlobal)
    if (hf == from) return to;
  static const std::pair<const char*, const char*> kLayer[] = {
      {"input_layernorm.weight", "attn_norm.weight"},        {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},          {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},     {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},           {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},           {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"}};
  static const std::regex kLayerName(R"(model\.layers\.(\d+)\.(.+))");
  std::smatch m;
  if (!std::regex_match(hf, m, kLayerName)) return "";
  for (const auto& [from, to] : kLayer)
    if (m[2] == from) return "blk." + m[1].str() + "." + to;
  return "";
}

ModelConfig gguf_model_config(const GgufFile& g, bool has_output_tensor) {
  const std::string& arch = g.get_string("general.architecture");
  if (arch != kArch)
    throw Error::in_file(g.path, "general.architecture", "\"llama\" (the architecture draftlab runs)", "\"" + arch + "\"");
  const std::string p = std::string(kArch) + ".";
  ModelConfig c;
  c.hidden_size = g.get_int(p + "embedding_length");
  c.intermediate_size = g.get_int(p + "feed_forward_length");
  c.num_hidden_layers = g.get_int(p + "block_count");
  c.num_attention_heads = g.get_int(p + "attention.head_count");
  c.num_key_value_heads = get_int_or(g, p + "attention.head_count_kv", c.num_attention_heads);
  c.head_dim = get_int_or(g, p + "attention.key_length",
                          c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0);
  if (get_int_or(g, p + "attention.value_length", c.head_dim) != c.head_dim)
    throw Error::in_file(g.path, p + "attention.value_length", "the key length " + std::to_string(c.head_dim),
                         std::to_string(g.get_int(p + "attention.value_length")));
  // draftlab rotates every channel of a head; partial rotary embeddings are another architecture.
  const int64_t rope_dims = get_int_or(g, p + "rope.dimension_count", c.head_dim);
  if (rope_dims != c.head_dim)
    throw Error::in_file(g.path, p + "rope.dimension_count", "the head size " + std::to_string(c.head_dim),
                         std::to_string(rope_dims));
  c.rms_norm_eps = get_float(g, p + "attention.layer_norm_rms_epsilon", 0.0, /*required=*/true);
  c.rope_theta = get_float(g, p + "rope.freq_base", 10000.0, /*required=*/false);
  c.max_position_embeddings = g.get_int(p + "context_length");
  if (g.has(p + "rope.scaling.type")) {
    const std::string& type = g.get_string(p + "rope.scaling.type");
    if (type == "linear") {
      c.rope_scaling.type = "linear";
      c.rope_scaling.factor = get_float(g, p + "rope.scaling.factor", 0.0, /*required=*/true);
    } else if (type != "none") {
      throw Error::in_file(g.path, p + "rope.scaling.type", "\"none\" or \"linear\"", "\"" + type + "\"");
    }
  }
  c.vocab_size = g.has(p + "vocab_size") ? g.get_int(p + "vocab_size")
                                         : static_cast<int64_t>(g.get_string_array("tokenizer.ggml.tokens").size());
  c.tie_word_embeddings = !has_output_tensor;
  c.num_local_experts = get_int_or(g, p + "expert_count", 0);
  if (c.num_local_experts > 0) c.num_experts_per_tok = g.get_int(p + "expert_used_count");
  if (g.has("tokenizer.ggml.bos_token_id")) c.bos_token_id = token_id(g, "tokenizer.ggml.bos_token_id");
  std::vector<int32_t> eos;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (!g.has(key)) continue;
    const int32_t id = token_id(g, key);
    if (std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  }
  if (!eos.empty()) c.eos_token_ids = eos;
  c.validate(g.path);
  return c;
}

GgufCheckpoint::GgufCheckpoint(const std::string& path)
    : file_(path), config_(gguf_model_config(file_.gguf(), file_.has("output.weight"))) {
  // Llama-3.1-style frequency scaling arrives as a rope_freqs tensor; ignoring it would silently change the model.
  if (file_.has("rope_freqs.weight"))
    throw Error::at(path, "tensor rope_freqs.weight (llama3 RoPE scaling) is not supported for GGUF models");
  // Merged experts [E, out, in]: each expert's matrix is a contiguous slice (quantized rows are whole blocks).
  const int64_t E = config_.num_local_experts;
  static const std::pair<const char*, const char*> kMerged[] = {
      {"ffn_gate_exps", "w1"}, {"ffn_up_exps", "w3"}, {"ffn_down_exps", "w2"}};
  for (int64_t l = 0; l < config_.num_hidden_layers && E > 0; ++l) {
    for (const auto& [merged, hf] : kMerged) {
      const std::string name = "blk." + std::to_string(l) + "." + merged + ".weight";
      const TensorEntry* t = file_.find(name);
      if (!t) continue;  // the loader reports a missing expert by its Hugging Face name
      if (t->shape.size() != 3 || t->shape[0] != E)
        throw Error::in_file(path, "tensor " + name + " shape", "[" + std::to_string(E) + " (llama.expert_count), out, in]",
                             shape_string(t->shape));
      for (int64_t j = 0; j < E; ++j) {
        TensorEntry slice = *t;
        slice.shape = {t->shape[1], t->shape[2]};
        slice.nbytes = t->nbytes / static_cast<size_t>(E);
        slice.data = t->data + static_cast<size_t>(j) * slice.nbytes;
        slice.name = name + "[" + std::to_string(j) + "]";
        expert_slices_.emplace("model.layers." + std::to_string(l) + ".block_sparse_moe.experts." + std::to_string(j) +
                                   "." + hf + ".weight",
                               std::move(slice));
      }
    }
  }
}

const TensorEntry* GgufCheckpoint::find(const std::string& hf_name) const {
  if (const auto it = expert_slices_.find(hf_name); it != expert_slices_.end()) return &it->second;
  const std::string name = gguf_tensor_name(hf_name);
  return name.empty() ? nullptr : file_.find(name);
}

}  // namespace draftlab
