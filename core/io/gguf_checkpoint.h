// GGUF checkpoints of the llama architecture (llama.cpp's model files, and draftlab export-gguf's output):
// the ModelConfig from the llama.* metadata and the tensors under their Hugging Face names.
//
// GGUF names, as llama.cpp's converter writes them (one table, used both ways: gguf_tensor_name):
//   model.embed_tokens.weight                      token_embd.weight
//   model.layers.N.input_layernorm.weight          blk.N.attn_norm.weight
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight blk.N.attn_{q,k,v,output}.weight
//   model.layers.N.post_attention_layernorm.weight blk.N.ffn_norm.weight
//   model.layers.N.mlp.{gate,up,down}_proj.weight  blk.N.ffn_{gate,up,down}.weight
//   model.layers.N.block_sparse_moe.gate.weight    blk.N.ffn_gate_inp.weight (the router of a mixture of experts)
//   ...block_sparse_moe.experts.J.{w1,w3,w2}.weight  slice J of blk.N.ffn_{gate,up,down}_exps.weight [E, out, in]
//                                                  (llama.cpp's merged experts; the older per-expert tensors of
//                                                  early Mixtral GGUFs are not read)
//   model.norm.weight                              output_norm.weight
//   lm_head.weight                                 output.weight (absent: tied to token_embd)
// GGUF llama models rotate consecutive channel pairs in RoPE, as Meta's and llama2.c's checkpoints do (the
// converter permutes Hugging Face's q/k rows back): load them with rope_pairs = true.
#pragma once

#include <map>
#include <string>

#include "core/io/gguf.h"
#include "core/io/model_config.h"
#include "core/io/tensor_entry.h"

namespace draftlab {

// The GGUF name of a Hugging Face Llama tensor name ("" when it has none).
std::string gguf_tensor_name(const std::string& hf_name);

class GgufCheckpoint {
 public:
  // Maps and validates the file: general.architecture "llama", the hyperparameters (a missing one is an Error
  // naming the key), tensor data inside the file. Throws Error naming the path.
  explicit GgufCheckpoint(const std::string& path);

  const ModelConfig& config() const { return config_; }
  // By Hugging Face name; nullptr when absent. Throws Error naming file, tensor and type for quantized tensors.
  const TensorEntry* find(const std::string& hf_name) const;
  const GgufFile& gguf() const { return file_.gguf(); }

 private:
  GgufTensorFile file_;
  ModelConfig config_;
  std::map<std::string, TensorEntry> expert_slices_;  // HF expert name -> its slice of a merged *_exps tensor
};

// The ModelConfig that the llama.* and tokenizer.ggml.* metadata describe (exposed for tests).
//   hidden_size = llama.embedding_length          intermediate_size = llama.feed_forward_length
//   num_hidden_layers = llama.block_count         num_attention_heads = llama.attention.head_count
//   num_key_value_heads = llama.attention.head_count_kv (default: heads)
//   head_dim = llama.attention.key_length (default: embedding / heads; must equal llama.rope.dimension_count)
//   rms_norm_eps = llama.attention.layer_norm_rms_epsilon   rope_theta = llama.rope.freq_base (default 10000)
//   rope_scaling = llama.rope.scaling.type "linear" + .factor   max_position_embeddings = llama.context_length
//   vocab_size = llama.vocab_size (default: the number of tokenizer.ggml.tokens)
//   bos_token_id = tokenizer.ggml.bos_token_id; eos_token_ids = tokenizer.ggml.{eos,eot,eom}_token_id, in that
//   order (llama.cpp ends generation on each); tie_word_embeddings = no output.weight tensor;
//   num_local_experts = llama.expert_count (default 0: dense), num_experts_per_tok = llama.expert_used_count.
ModelConfig gguf_model_config(const GgufFile& gguf, bool has_output_tensor);

}  // namespace draftlab
