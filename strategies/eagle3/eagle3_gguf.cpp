#include "strategies/eagle3/eagle3_gguf.h"

#include <vector>

#include "core/io/gguf_writer.h"
#include "core/training/gguf_export.h"

namespace draftlab {

void export_eagle3_gguf(const Eagle3Head& head, const Tokenizer& tokenizer, const std::string& path, GgmlType type,
                        const std::string& name) {
  const ModelConfig& c = head.config();
  const ModelConfig& t = head.target().config();
  const Eagle3HeadWeights& hw = head.weights();
  const int64_t H = c.num_attention_heads, KVH = c.num_key_value_heads, hd = c.head_dim, I = c.intermediate_size;
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };

  GgufWriter w;
  w.add_string("general.architecture", "eagle3");
  if (!name.empty()) w.add_string("general.name", name);
  w.add("general.file_type", gguf_file_type(type));
  w.add("eagle3.context_length", u32(t.max_position_embeddings));
  w.add("eagle3.embedding_length", u32(c.hidden_size));
  w.add("eagle3.block_count", u32(1));
  w.add("eagle3.feed_forward_length", u32(I));
  w.add("eagle3.attention.head_count", u32(H));
  w.add("eagle3.attention.head_count_kv", u32(KVH));
  w.add("eagle3.attention.key_length", u32(hd));
  w.add("eagle3.attention.value_length", u32(hd));
  w.add("eagle3.attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  w.add("eagle3.rope.freq_base", static_cast<float>(c.rope_theta));
  w.add("eagle3.rope.dimension_count", u32(hd));
  w.add("eagle3.vocab_size", u32(t.vocab_size));
  std::vector<int32_t> layers;
  for (int64_t l : head.input_layers()) layers.push_back(static_cast<int32_t>(l));
  w.add_array("eagle3.target_layers", layers);
  w.add("eagle3.target_hidden_size", u32(t.hidden_size));
  w.add("eagle3.norm_before_residual", false);
  add_gguf_vocabulary(w, tokenizer, t, path);

  const auto f = [](const at::Tensor& x) { return x.detach().to(at::kCPU, at::kFloat); };
  const LlamaLayerWeights& L = hw.layer;
  const auto wqkv = f(L.wqkv), gate_up = f(L.w_gate_up);
  std::vector<at::Tensor> keep;
  auto add = [&](const std::string& n, const at::Tensor& x) { add_gguf_tensor(w, n, x, type, keep, path); };
  add("fc.weight", f(hw.fc));
  add("blk.0.attn_norm.weight", f(hw.input_norm));
  add("blk.0.attn_norm_2.weight", f(hw.hidden_norm));
  add("blk.0.attn_q.weight", rope_halves_to_pairs(wqkv.narrow(0, 0, H * hd), H, hd));
  add("blk.0.attn_k.weight", rope_halves_to_pairs(wqkv.narrow(0, H * hd, KVH * hd), KVH, hd));
  add("blk.0.attn_v.weight", wqkv.narrow(0, (H + KVH) * hd, KVH * hd));
  add("blk.0.attn_output.weight", f(L.wo));
  add("blk.0.ffn_norm.weight", f(L.mlp_norm));
  add("blk.0.ffn_gate.weight", gate_up.narrow(0, 0, I));
  add("blk.0.ffn_up.weight", gate_up.narrow(0, I, I));
  add("blk.0.ffn_down.weight", f(L.w_down));
  add("output_norm.weight", f(hw.norm));
  add("output.weight", f(hw.lm_head));
  if (head.draft_ids().defined()) {
    keep.push_back(head.draft_ids().to(at::kLong).contiguous());
    w.add_tensor("d2t", kGgmlI64, {keep.back().size(0)}, keep.back().data_ptr(), static_cast<size_t>(keep.back().nbytes()));
  }
  w.write(path);
}

}  // namespace draftlab
