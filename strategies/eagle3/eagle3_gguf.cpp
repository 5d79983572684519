#include "strategies/eagle3/eagle3_gguf.h"

#include <vector>

#include "core/base/error.h"
#include "core/io/gguf_writer.h"
#include "core/training/gguf_export.h"

namespace draftlab {

void export_eagle3_gguf(const Eagle3Head& head, const Tokenizer& tokenizer, const std::string& path, GgmlType type,
                        const std::string& name) {
  if (head.is_eagle31())
    throw Error("cannot write " + path + ": an EAGLE-3.1 head (fc_norm / norm_output): llama.cpp b10256's eagle3 "
                "architecture has neither (only norm_before_fc, one norm over all three features); nothing written");
  const ModelConfig& c = head.config();
  const ModelConfig& t = head.target().config();
  const Eagle3HeadWeights& hw = head.weights();
  const int64_t H = c.num_attention_heads, KVH = c.num_key_value_heads, hd = c.head_dim, I = c.intermediate_size;
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };

  GgufWriter w;
  add_gguf_header(w, "eagle3", name, type);
  add_gguf_layer_shape(w, "eagle3", c, t.max_position_embeddings, 1);
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
