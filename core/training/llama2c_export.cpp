#include "core/training/llama2c_export.h"

#include <cmath>
#include <cstring>

#include "core/base/error.h"
#include "core/base/file_bytes.h"

namespace draftlab {

namespace {

// Halves (i, i + hd/2) -> pairs (2i, 2i+1) within each head: the inverse of the loader's permutation.
at::Tensor halves_to_pairs(const at::Tensor& w, int64_t heads, int64_t head_dim) {
  return w.view({heads, 2, head_dim / 2, w.size(1)}).transpose(1, 2).reshape({heads * head_dim, w.size(1)});
}

void append(std::string& out, const at::Tensor& t) {
  const auto c = t.to(at::kFloat).contiguous();
  out.append(reinterpret_cast<const char*>(c.data_ptr<float>()), static_cast<size_t>(c.nbytes()));
}

}  // namespace

void export_llama2c(const LlamaModel& model, const std::string& path) {
  const ModelConfig& c = model.config();
  auto require = [&](bool ok, const std::string& field, const std::string& expected, const std::string& got) {
    if (!ok) throw Error(path + ": cannot export to llama2.c: " + field + ": expected " + expected + ", got " + got);
  };
  require(!c.mixture_of_experts(), "num_local_experts", "0 (llama2.c has dense MLPs only)",
          std::to_string(c.num_local_experts));
  require(c.head_dim * c.num_attention_heads == c.hidden_size, "head_dim", "hidden_size / num_attention_heads",
          std::to_string(c.head_dim));
  require(c.rope_theta == 10000.0, "rope_theta", "10000 (run.c hard-codes it)", std::to_string(c.rope_theta));
  require(c.rope_scaling.type.empty(), "rope_scaling", "none", c.rope_scaling.type);
  require(std::abs(c.rms_norm_eps - 1e-5) < 1e-12, "rms_norm_eps", "1e-5 (run.c hard-codes it)",
          std::to_string(c.rms_norm_eps));

  const int64_t L = c.num_hidden_layers, H = c.num_attention_heads, KVH = c.num_key_value_heads, hd = c.head_dim;
  std::map<std::string, at::Tensor> t;
  for (auto& [name, tensor] : hf_named_tensors(c, model.weights(), at::kFloat)) t[name] = tensor;
  auto layer = [&](int64_t l, const std::string& suffix) { return t.at("model.layers." + std::to_string(l) + "." + suffix); };

  const int32_t header[7] = {static_cast<int32_t>(c.hidden_size), static_cast<int32_t>(c.intermediate_size),
                             static_cast<int32_t>(L), static_cast<int32_t>(H), static_cast<int32_t>(KVH),
                             static_cast<int32_t>(c.tie_word_embeddings ? c.vocab_size : -c.vocab_size),
                             static_cast<int32_t>(c.max_position_embeddings)};
  std::string out(reinterpret_cast<const char*>(header), sizeof header);
  append(out, t.at("model.embed_tokens.weight"));
  // Each kind of array holds all layers back to back, in run.c's order.
  for (int64_t l = 0; l < L; ++l) append(out, layer(l, "input_layernorm.weight"));
  for (int64_t l = 0; l < L; ++l) append(out, halves_to_pairs(layer(l, "self_attn.q_proj.weight"), H, hd));
  for (int64_t l = 0; l < L; ++l) append(out, halves_to_pairs(layer(l, "self_attn.k_proj.weight"), KVH, hd));
  for (int64_t l = 0; l < L; ++l) append(out, layer(l, "self_attn.v_proj.weight"));
  for (int64_t l = 0; l < L; ++l) append(out, layer(l, "self_attn.o_proj.weight"));
  for (int64_t l = 0; l < L; ++l) append(out, layer(l, "post_attention_layernorm.weight"));
  for (int64_t l = 0; l < L; ++l) append(out, layer(l, "mlp.gate_proj.weight"));  // w1
  for (int64_t l = 0; l < L; ++l) append(out, layer(l, "mlp.down_proj.weight"));  // w2
  for (int64_t l = 0; l < L; ++l) append(out, layer(l, "mlp.up_proj.weight"));    // w3
  append(out, t.at("model.norm.weight"));
  // freq_cis_real / freq_cis_imag: run.c no longer reads them, but older readers do; written as llama2.c's export.
  auto angles = at::arange(c.max_position_embeddings, at::kDouble).unsqueeze(1) *
                at::pow(10000.0, -at::arange(0, hd, 2, at::kDouble) / static_cast<double>(hd)).unsqueeze(0);
  append(out, angles.cos());
  append(out, angles.sin());
  if (!c.tie_word_embeddings) append(out, t.at("lm_head.weight"));
  write_file_atomically(path, out);
}

}  // namespace draftlab
