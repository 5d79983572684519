// llama2.c checkpoints (Karpathy's run.c format), legacy "v0" layout:
//   int32 header [dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len]
//   (vocab_size < 0 means an untied classifier follows at the end), then fp32 arrays:
//   token_embedding [vocab, dim], rms_att [L, dim], wq [L, dim, dim], wk [L, kv_dim, dim], wv [L, kv_dim, dim],
//   wo [L, dim, dim], rms_ffn [L, dim], w1 [L, hidden, dim], w2 [L, dim, hidden], w3 [L, hidden, dim],
//   rms_final [dim], freq_cis_real [seq_len, head_size/2], freq_cis_imag [...] (skipped), wcls [vocab, dim].
// Matrices are [out, in], as in PyTorch's Linear. llama2.c's RoPE rotates consecutive pairs (2i, 2i+1);
// the entries here are as stored - the model loader permutes q/k rows to the halves convention.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/base/file_bytes.h"
#include "core/io/model_config.h"
#include "core/io/tensor_entry.h"

namespace draftlab {

class Llama2cCheckpoint {
 public:
  // Maps and validates: header sanity (positive sizes, heads divide dim, kv heads divide heads) and exact file
  // size for the header's shapes. Throws Error naming the path, the field and expected/actual values.
  explicit Llama2cCheckpoint(const std::string& path);

  const ModelConfig& config() const { return config_; }
  bool shared_classifier() const { return shared_classifier_; }

  // Tensors under Hugging Face names, one entry per layer: model.embed_tokens.weight,
  // model.layers.{i}.input_layernorm.weight, model.layers.{i}.self_attn.{q,k,v,o}_proj.weight,
  // model.layers.{i}.post_attention_layernorm.weight, model.layers.{i}.mlp.{gate,down,up}_proj.weight
  // (w1 = gate, w2 = down, w3 = up), model.norm.weight, and lm_head.weight only when not shared.
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const TensorEntry* find(const std::string& name) const;
  const std::string& path() const { return bytes_.path(); }

 private:
  FileBytes bytes_;
  ModelConfig config_;
  bool shared_classifier_ = true;
  std::vector<TensorEntry> tensors_;
};

}  // namespace draftlab
