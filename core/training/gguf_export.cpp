#include "core/training/gguf_export.h"

#include <algorithm>
#include <map>
#include <regex>

#include "core/base/error.h"
#include "core/io/ggml_quant.h"
#include "core/io/gguf_checkpoint.h"
#include "core/io/gguf_writer.h"
#include "core/text/gguf_vocabulary.h"

namespace draftlab {

namespace {

at::ScalarType scalar_type(GgmlType type) {
  switch (type) {
    case kGgmlF32: return at::kFloat;
    case kGgmlF16: return at::kHalf;
    case kGgmlBF16: return at::kBFloat16;
    default: return at::kFloat;  // block-quantized types are quantized from float32
  }
}

void add_hyperparameters(GgufWriter& w, const ModelConfig& c, const std::string& path) {
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  add_gguf_layer_shape(w, "llama", c, c.max_position_embeddings, c.num_hidden_layers);
  w.add("llama.vocab_size", u32(c.vocab_size));
  if (c.mixture_of_experts()) {
    w.add("llama.expert_count", u32(c.num_local_experts));
    w.add("llama.expert_used_count", u32(c.num_experts_per_tok));
  }
  if (c.rope_scaling.type == "linear") {
    w.add_string("llama.rope.scaling.type", "linear");
    w.add("llama.rope.scaling.factor", static_cast<float>(c.rope_scaling.factor));
  } else if (!c.rope_scaling.type.empty()) {
    // llama.cpp stores llama3 scaling as a rope_freqs tensor; draftlab neither writes nor reads that yet.
    throw Error(path + ": cannot export to GGUF: rope_scaling: expected none or linear, got " + c.rope_scaling.type);
  }
}

// The config's stop tokens other than `eos` (tokenizer.ggml.eos_token_id), as eot / eom ids (see the header).
void add_other_stop_tokens(GgufWriter& w, const ModelConfig& c, int32_t eos, const std::string& path) {
  std::vector<int32_t> others;
  for (int32_t id : c.eos_token_ids)
    if (id != eos && std::find(others.begin(), others.end(), id) == others.end()) others.push_back(id);
  if (others.size() > 2)
    throw Error(path + ": cannot export to GGUF: eos_token_id: expected at most 3 stop tokens (GGUF's eos, eot and "
                "eom), got " + std::to_string(others.size() + 1));
  if (others.size() > 0) w.add("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(others[0]));
  if (others.size() > 1) w.add("tokenizer.ggml.eom_token_id", static_cast<uint32_t>(others[1]));
}

// The tensors under their GGUF names (float32, Hugging Face layout). A mixture of experts' per-expert matrices are
// stacked into llama.cpp's merged [E, out, in] tensors blk.N.ffn_{gate,up,down}_exps.
struct NamedTensor {
  std::string hf_name, gguf_name;
  at::Tensor tensor;
};
std::vector<NamedTensor> gguf_tensors(const ModelConfig& c, const LlamaWeights& weights, const std::string& path) {
  std::vector<NamedTensor> out;
  std::map<std::string, std::vector<at::Tensor>> experts;  // merged GGUF name -> experts in order
  static const std::regex kExpert(R"(model\.layers\.(\d+)\.block_sparse_moe\.experts\.(\d+)\.(w1|w2|w3)\.weight)");
  for (auto& [hf_name, tensor] : hf_named_tensors(c, weights, at::kFloat)) {
    std::smatch m;
    if (std::regex_match(hf_name, m, kExpert)) {
      const std::string which = m[3] == "w1" ? "ffn_gate_exps" : m[3] == "w3" ? "ffn_up_exps" : "ffn_down_exps";
      const std::string merged = "blk." + m[1].str() + "." + which + ".weight";
      auto& list = experts[merged];
      list.push_back(tensor);
      if (static_cast<int64_t>(list.size()) == c.num_local_experts)  // hf_named_tensors lists experts in order
        out.push_back({hf_name, merged, at::stack(list, 0)});
      continue;
    }
    const std::string gguf_name = gguf_tensor_name(hf_name);
    if (gguf_name.empty()) throw Error(path + ": cannot export to GGUF: no GGUF name for tensor " + hf_name);
    out.push_back({hf_name, gguf_name, tensor});
  }
  return out;
}

}  // namespace

// Halves (i, i + hd/2) -> pairs (2i, 2i+1) within each head: the inverse of the loader's pairs_to_halves.
at::Tensor rope_halves_to_pairs(const at::Tensor& w, int64_t heads, int64_t head_dim) {
  return w.reshape({heads, 2, head_dim / 2, w.size(1)}).transpose(1, 2).reshape({heads * head_dim, w.size(1)});
}

// llama.cpp's LlamaFileType: ALL_F32, MOSTLY_F16, MOSTLY_Q4_0, MOSTLY_Q8_0, MOSTLY_BF16.
uint32_t gguf_file_type(GgmlType type) {
  switch (type) {
    case kGgmlF32: return 0;
    case kGgmlF16: return 1;
    case kGgmlQ4_0: return 2;
    case kGgmlQ8_0: return 7;
    case kGgmlBF16: return 32;
    default: return 0;
  }
}

void add_gguf_header(GgufWriter& w, const std::string& arch, const std::string& name, GgmlType type) {
  w.add_string("general.architecture", arch);
  if (!name.empty()) w.add_string("general.name", name);
  w.add("general.file_type", gguf_file_type(type));
}

void add_gguf_layer_shape(GgufWriter& w, const std::string& arch, const ModelConfig& c, int64_t context_length,
                          int64_t block_count) {
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  w.add(arch + ".context_length", u32(context_length));
  w.add(arch + ".embedding_length", u32(c.hidden_size));
  w.add(arch + ".block_count", u32(block_count));
  w.add(arch + ".feed_forward_length", u32(c.intermediate_size));
  w.add(arch + ".attention.head_count", u32(c.num_attention_heads));
  w.add(arch + ".attention.head_count_kv", u32(c.num_key_value_heads));
  w.add(arch + ".attention.key_length", u32(c.head_dim));
  w.add(arch + ".attention.value_length", u32(c.head_dim));
  w.add(arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  w.add(arch + ".rope.freq_base", static_cast<float>(c.rope_theta));
  w.add(arch + ".rope.dimension_count", u32(c.head_dim));
}

void add_gguf_vocabulary(GgufWriter& w, const Tokenizer& tokenizer, const ModelConfig& c, const std::string& path) {
  GgufVocabulary vocab = tokenizer.gguf_vocabulary();
  vocab.pad_to(c.vocab_size);
  if (vocab.bos_id < 0) vocab.bos_id = c.bos_token_id;
  if (vocab.eos_id < 0) vocab.eos_id = c.eos_token_ids.at(0);
  vocab.write_to(w);
  add_other_stop_tokens(w, c, vocab.eos_id, path);
}

void add_gguf_tensor(GgufWriter& w, const std::string& name, const at::Tensor& tensor, GgmlType type,
                     std::vector<at::Tensor>& keep, const std::string& path) {
  const GgmlType tensor_type = tensor.dim() == 1 ? kGgmlF32 : type;
  at::Tensor t = tensor.to(at::kCPU, scalar_type(tensor_type)).contiguous();
  if (const size_t block_bytes = ggml_quant_block_bytes(tensor_type); block_bytes != 0) {
    // Every matrix in the one block type (llama-quantize --pure), rows of 32-value blocks.
    if (t.size(-1) % kGgmlQuantBlock != 0)
      throw Error(path + ": cannot export to GGUF as " + ggml_type_name(tensor_type) + ": tensor " + name +
                  " has rows of " + std::to_string(t.size(-1)) + " values, expected a multiple of 32");
    at::Tensor blocks = at::empty({t.numel() / kGgmlQuantBlock * static_cast<int64_t>(block_bytes)}, at::kByte);
    quantize_blocks(tensor_type, t.data_ptr<float>(), t.numel(), blocks.data_ptr<uint8_t>());
    w.add_tensor(name, tensor_type, t.sizes().vec(), blocks.data_ptr(), static_cast<size_t>(blocks.nbytes()));
    keep.push_back(std::move(blocks));
    return;
  }
  w.add_tensor(name, tensor_type, t.sizes().vec(), t.data_ptr(), static_cast<size_t>(t.nbytes()));
  keep.push_back(std::move(t));
}

void export_gguf(const LlamaModel& model, const Tokenizer& tokenizer, const std::string& path, GgmlType type,
                 const std::string& name) {
  const ModelConfig& c = model.config();
  GgufWriter w;
  add_gguf_header(w, "llama", name, type);
  add_hyperparameters(w, c, path);
  add_gguf_vocabulary(w, tokenizer, c, path);

  const int64_t H = c.num_attention_heads, KVH = c.num_key_value_heads, hd = c.head_dim;
  std::vector<at::Tensor> keep_alive;  // the writer reads the bytes at write()
  for (auto& [hf_name, gguf_name, tensor] : gguf_tensors(c, model.weights(), path)) {
    at::Tensor t = tensor;
    if (hf_name.find("self_attn.q_proj") != std::string::npos) t = rope_halves_to_pairs(t, H, hd);
    if (hf_name.find("self_attn.k_proj") != std::string::npos) t = rope_halves_to_pairs(t, KVH, hd);
    // llama.cpp computes norms in F32 and its converter keeps every 1-D tensor F32 in 16-bit files; the router
    // stays F32 in every file (llama.cpp's converter and llama-quantize never round it).
    const bool router = gguf_name.find("ffn_gate_inp") != std::string::npos;
    add_gguf_tensor(w, gguf_name, t, router ? kGgmlF32 : type, keep_alive, path);
  }
  w.write(path);
}

}  // namespace draftlab
