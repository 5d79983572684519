#include "strategies/dflash/dflash_gguf.h"

#include <vector>

#include "core/io/gguf_writer.h"
#include "core/training/gguf_export.h"

namespace draftlab {

void export_dflash_gguf(const DFlashHead& head, const Tokenizer& tokenizer, const std::string& path, GgmlType type,
                        const std::string& name) {
  const DFlashConfig& config = head.config();
  const ModelConfig& c = config.layers;
  const ModelConfig& t = head.target().config();
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };

  GgufWriter w;
  add_gguf_header(w, "dflash", name, type);
  add_gguf_layer_shape(w, "dflash", c, c.max_position_embeddings, c.num_hidden_layers);
  w.add("dflash.attention.causal", false);
  std::vector<int32_t> inputs;  // the input of layer l + 1 is the output of layer l
  for (int64_t l : config.target_layer_ids) inputs.push_back(static_cast<int32_t>(l + 1));
  w.add_array("dflash.target_layers", inputs);
  w.add("dflash.block_size", u32(config.block_size));
  w.add("dflash.mask_token_id", u32(config.mask_token));
  add_gguf_vocabulary(w, tokenizer, t, path);
  w.add("tokenizer.ggml.mask_token_id", u32(config.mask_token));

  const auto f = [](const at::Tensor& x) { return x.detach().to(at::kCPU, at::kFloat); };
  const DFlashWeights& hw = head.weights();
  std::vector<at::Tensor> keep;
  auto add = [&](const std::string& n, const at::Tensor& x) { add_gguf_tensor(w, n, f(x), type, keep, path); };
  add("fc.weight", hw.fc);
  add("enc.output_norm.weight", hw.hidden_norm);
  for (size_t i = 0; i < hw.layers.size(); ++i) {
    const DFlashLayerWeights& L = hw.layers[i];
    const std::string b = "blk." + std::to_string(i) + ".";
    add(b + "attn_norm.weight", L.attn_norm);
    add(b + "attn_q.weight", L.wq);
    add(b + "attn_k.weight", L.wk);
    add(b + "attn_v.weight", L.wv);
    add(b + "attn_output.weight", L.wo);
    add(b + "attn_q_norm.weight", L.q_norm);
    add(b + "attn_k_norm.weight", L.k_norm);
    add(b + "ffn_norm.weight", L.mlp_norm);
    add(b + "ffn_gate.weight", L.w_gate);
    add(b + "ffn_up.weight", L.w_up);
    add(b + "ffn_down.weight", L.w_down);
  }
  add("output_norm.weight", hw.norm);
  w.write(path);
}

}  // namespace draftlab
