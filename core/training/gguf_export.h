// Export to GGUF (llama.cpp's model file; the writer is core/io/gguf_writer.h), so llama.cpp runs the very same
// weights and vocabulary as draftlab, and LlamaModel::load / load_tokenizer read the file back.
#pragma once

#include <string>

#include <vector>

#include "core/io/gguf.h"
#include "core/io/gguf_writer.h"
#include "core/model/llama_model.h"
#include "core/text/tokenizer.h"

namespace draftlab {

// Writes `path` atomically: general.architecture "llama", the llama.* hyperparameters, the tokenizer's vocabulary
// (Tokenizer::gguf_vocabulary, padded to vocab_size), and the tensors under llama.cpp's names
// (core/io/gguf_checkpoint.h) with q/k rows permuted from the halves RoPE layout to consecutive pairs, as
// llama.cpp's converter does. Matrices are stored as `type` (kGgmlF32, kGgmlF16, kGgmlBF16, or kGgmlQ8_0 /
// kGgmlQ4_0 quantized as llama-quantize --pure does: core/io/ggml_quant.h); norms stay F32 as llama.cpp expects;
// output.weight is left out when the embeddings are tied.
// Stop tokens: tokenizer.ggml.eos_token_id is the tokenizer's EOS, and the config's other eos_token_ids become
// tokenizer.ggml.eot_token_id / eom_token_id, which llama.cpp also ends generation on (at most three in all).
// Throws Error for what GGUF's llama architecture cannot express (llama3 RoPE scaling, such stop lists).
void export_gguf(const LlamaModel& model, const Tokenizer& tokenizer, const std::string& path, GgmlType type,
                 const std::string& name);

// The pieces a draft head's exporter shares with the model's (strategies/eagle3/eagle3_gguf.h, dflash/dflash_gguf.h).
// general.architecture = arch, general.name (unless empty), general.file_type for matrices of `type`.
void add_gguf_header(GgufWriter& w, const std::string& arch, const std::string& name, GgmlType type);
// ARCH.{context_length, embedding_length, block_count, feed_forward_length, attention.{head_count, head_count_kv,
// key_length, value_length, layer_norm_rms_epsilon}, rope.{freq_base, dimension_count}} of decoder layers shaped as
// `layers` (its head_dim, rms_norm_eps, rope_theta), `block_count` of them.
void add_gguf_layer_shape(GgufWriter& w, const std::string& arch, const ModelConfig& layers, int64_t context_length,
                          int64_t block_count);
// q/k rows [heads hd, in] from the halves RoPE layout to llama.cpp's consecutive pairs (its converter's permute).
at::Tensor rope_halves_to_pairs(const at::Tensor& w, int64_t heads, int64_t head_dim);
// general.file_type's value (llama.cpp's LlamaFileType) for matrices of `type`.
uint32_t gguf_file_type(GgmlType type);
// tokenizer.ggml.*: the tokenizer's vocabulary padded to model.vocab_size, BOS / EOS (the config's when the tokenizer
// has none) and the config's other stop tokens as eot / eom.
void add_gguf_vocabulary(GgufWriter& w, const Tokenizer& tokenizer, const ModelConfig& model, const std::string& path);
// A float tensor in PyTorch layout as `type`: 1-D tensors stay F32 (llama.cpp's norms), Q8_0 / Q4_0 are quantized
// as llama-quantize --pure does. The bytes live in `keep` until the writer's write().
void add_gguf_tensor(GgufWriter& w, const std::string& name, const at::Tensor& tensor, GgmlType type,
                     std::vector<at::Tensor>& keep, const std::string& path);

}  // namespace draftlab
