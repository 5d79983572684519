#include "core/model/llama_weights.h"

#include <ATen/CPUGeneratorImpl.h>


#include "core/base/error.h"
#include "core/model/checkpoint_tensor.h"

namespace draftlab {

namespace {

// Pairs (2i, 2i+1) -> halves (i, i + hd/2) within each head: the inverse of Meta's interleaving, the same
// permutation Hugging Face's convert_llama_weights_to_hf applies.
at::Tensor pairs_to_halves(const at::Tensor& w, int64_t heads, int64_t head_dim) {
  const int64_t in = w.size(1);
  return w.view({heads, head_dim / 2, 2, in}).transpose(1, 2).reshape({heads * head_dim, in});
}

}  // namespace

at::Tensor column_major(const at::Tensor& m) {
  if (m.dim() == 2 && m.stride(0) == 1 && m.stride(1) == m.size(0)) return m;
  return m.t().contiguous().t();
}

void use_column_major(LlamaLayerWeights& L) {
  L.wqkv = column_major(L.wqkv);
  L.wo = column_major(L.wo);
  if (L.w_gate_up.defined()) L.w_gate_up = column_major(L.w_gate_up);
  if (L.w_down.defined()) L.w_down = column_major(L.w_down);
  if (L.router.defined()) L.router = column_major(L.router);
  for (auto& e : L.expert_gate_up) e = column_major(e);
  for (auto& e : L.expert_down) e = column_major(e);
}

void use_column_major(LlamaWeights& w) {
  for (auto& L : w.layers) use_column_major(L);
  // A tied head gets its own column-major copy: the embedding lookup wants rows, the head wants columns.
  w.lm_head = column_major(w.lm_head);
}

LlamaWeights load_llama_weights(const ModelConfig& c, const TensorLookup& lookup, bool rope_pairs,
                                const std::string& source, const ComputeOptions& o, const LayerSink& on_layer) {
  auto get = [&](const std::string& name, const std::vector<int64_t>& shape) {
    const TensorEntry* e = lookup(name);
    if (!e) throw Error::at(source, "tensor '" + name + "' not found (expected shape " + shape_string(shape) + ")");
    return checkpoint_tensor(*e, shape, o);
  };
  const int64_t d = c.hidden_size, hd = c.head_dim, H = c.num_attention_heads, KVH = c.num_key_value_heads;
  const int64_t I = c.intermediate_size, V = c.vocab_size;

  LlamaWeights w;
  w.embed = get("model.embed_tokens.weight", {V, d});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LlamaLayerWeights L;
    L.attn_norm = get(p + "input_layernorm.weight", {d});
    auto q = get(p + "self_attn.q_proj.weight", {H * hd, d});
    auto k = get(p + "self_attn.k_proj.weight", {KVH * hd, d});
    auto v = get(p + "self_attn.v_proj.weight", {KVH * hd, d});
    if (rope_pairs) {
      q = pairs_to_halves(q, H, hd);
      k = pairs_to_halves(k, KVH, hd);
    }
    L.wqkv = at::cat({q, k, v}, 0);
    L.wo = get(p + "self_attn.o_proj.weight", {d, H * hd});
    L.mlp_norm = get(p + "post_attention_layernorm.weight", {d});
    if (c.mixture_of_experts()) {
      const std::string m = p + "block_sparse_moe.";
      L.router = get(m + "gate.weight", {c.num_local_experts, d});
      for (int64_t j = 0; j < c.num_local_experts; ++j) {
        const std::string e = m + "experts." + std::to_string(j) + ".";
        L.expert_gate_up.push_back(at::cat({get(e + "w1.weight", {I, d}), get(e + "w3.weight", {I, d})}, 0));
        L.expert_down.push_back(get(e + "w2.weight", {d, I}));
      }
    } else {
      L.w_gate_up = at::cat({get(p + "mlp.gate_proj.weight", {I, d}), get(p + "mlp.up_proj.weight", {I, d})}, 0);
      L.w_down = get(p + "mlp.down_proj.weight", {d, I});
    }
    // The sink packs from any layout; what it leaves in memory is made column-major (no copy of what it drops).
    if (on_layer) on_layer(L);
    if (L.wqkv.defined()) use_column_major(L);
    w.layers.push_back(std::move(L));
  }
  w.norm = get("model.norm.weight", {d});
  if (c.tie_word_embeddings) {
    w.lm_head = w.embed;
  } else {
    if (!lookup("lm_head.weight"))
      throw Error::at(source, "tensor 'lm_head.weight' not found and tie_word_embeddings is false");
    w.lm_head = get("lm_head.weight", {V, d});
  }
  // Layers are column-major already. With a sink (the native path) the LM head stays as read - tied, the embedding
  // itself: LlamaModel packs it from there and makes it column-major only if it keeps it.
  if (!on_layer) w.lm_head = column_major(w.lm_head);
  return w;
}

LlamaWeights random_llama_weights(const ModelConfig& c, uint64_t seed, const ComputeOptions& o) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto normal = [&](std::vector<int64_t> shape) {
    return at::normal(0.0, 0.02, shape, gen, at::TensorOptions().dtype(at::kFloat)).to(o.device, o.dtype);
  };
  auto ones = [&](int64_t n) { return at::ones({n}, o.tensor_options()); };
  const int64_t d = c.hidden_size, hd = c.head_dim, H = c.num_attention_heads, KVH = c.num_key_value_heads;
  LlamaWeights w;
  w.embed = normal({c.vocab_size, d});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LlamaLayerWeights L;
    L.attn_norm = ones(d);
    L.wqkv = normal({(H + 2 * KVH) * hd, d});
    L.wo = normal({d, H * hd});
    L.mlp_norm = ones(d);
    if (c.mixture_of_experts()) {
      L.router = normal({c.num_local_experts, d});
      for (int64_t j = 0; j < c.num_local_experts; ++j) {
        L.expert_gate_up.push_back(normal({2 * c.intermediate_size, d}));
        L.expert_down.push_back(normal({d, c.intermediate_size}));
      }
    } else {
      L.w_gate_up = normal({2 * c.intermediate_size, d});
      L.w_down = normal({d, c.intermediate_size});
    }
    w.layers.push_back(std::move(L));
  }
  w.norm = ones(d);
  w.lm_head = c.tie_word_embeddings ? w.embed : normal({c.vocab_size, d});
  use_column_major(w);
  return w;
}

std::vector<std::pair<std::string, at::Tensor>> hf_named_tensors(const ModelConfig& c, const LlamaWeights& w,
                                                                 at::ScalarType dtype) {
  auto out_t = [&](const at::Tensor& t) { return t.detach().to(at::kCPU, dtype).contiguous(); };
  const int64_t hd = c.head_dim, H = c.num_attention_heads, KVH = c.num_key_value_heads;
  const int64_t I = c.intermediate_size;
  std::vector<std::pair<std::string, at::Tensor>> out;
  out.emplace_back("model.embed_tokens.weight", out_t(w.embed));
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const LlamaLayerWeights& L = w.layers[l];
    out.emplace_back(p + "input_layernorm.weight", out_t(L.attn_norm));
    out.emplace_back(p + "self_attn.q_proj.weight", out_t(L.wqkv.narrow(0, 0, H * hd)));
    out.emplace_back(p + "self_attn.k_proj.weight", out_t(L.wqkv.narrow(0, H * hd, KVH * hd)));
    out.emplace_back(p + "self_attn.v_proj.weight", out_t(L.wqkv.narrow(0, (H + KVH) * hd, KVH * hd)));
    out.emplace_back(p + "self_attn.o_proj.weight", out_t(L.wo));
    out.emplace_back(p + "post_attention_layernorm.weight", out_t(L.mlp_norm));
    if (c.mixture_of_experts()) {
      const std::string m = p + "block_sparse_moe.";
      out.emplace_back(m + "gate.weight", out_t(L.router));
      for (size_t j = 0; j < L.expert_gate_up.size(); ++j) {
        const std::string e = m + "experts." + std::to_string(j) + ".";
        out.emplace_back(e + "w1.weight", out_t(L.expert_gate_up[j].narrow(0, 0, I)));
        out.emplace_back(e + "w2.weight", out_t(L.expert_down[j]));
        out.emplace_back(e + "w3.weight", out_t(L.expert_gate_up[j].narrow(0, I, I)));
      }
    } else {
      out.emplace_back(p + "mlp.gate_proj.weight", out_t(L.w_gate_up.narrow(0, 0, I)));
      out.emplace_back(p + "mlp.up_proj.weight", out_t(L.w_gate_up.narrow(0, I, I)));
      out.emplace_back(p + "mlp.down_proj.weight", out_t(L.w_down));
    }
  }
  out.emplace_back("model.norm.weight", out_t(w.norm));
  if (!c.tie_word_embeddings) out.emplace_back("lm_head.weight", out_t(w.lm_head));
  return out;
}

}  // namespace draftlab
