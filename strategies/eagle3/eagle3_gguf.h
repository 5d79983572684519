// An EAGLE-3 head as the GGUF llama.cpp's `--spec-type draft-eagle3` reads (architecture `eagle3`, its
// models/eagle3.cpp; ../shared/peers/README.md): eagle3.target_layers = the three target layers whose inputs the head
// fuses, in fc's order; eagle3.target_hidden_size; the usual eagle3.* hyperparameters of its one layer (block_count
// 1, RoPE theta the head's); the target's tokenizer; tensors fc.weight, blk.0.{attn_norm (input_layernorm),
// attn_norm_2 (hidden_norm), attn_q, attn_k (rows permuted for llama.cpp's RoPE, as its converter does for llama),
// attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}.weight, output_norm.weight, output.weight (the draft
// vocabulary's rows) and, for a draft vocabulary smaller than the target's, d2t as int64 ABSOLUTE target ids (the
// official file's are offsets). No token_embd: llama.cpp then uses the target's embedding, as draftlab does.
#pragma once

#include <string>

#include "core/io/gguf.h"
#include "core/text/tokenizer.h"
#include "strategies/eagle3/eagle3_head.h"

namespace draftlab {

// Writes `path` atomically. Matrices as `type` (F32, F16, BF16, Q8_0, Q4_0), norms F32. Throws Error, writing
// nothing, for an EAGLE-3.1 head (the architecture has no fc_norm or norm_output).
void export_eagle3_gguf(const Eagle3Head& head, const Tokenizer& tokenizer, const std::string& path, GgmlType type,
                        const std::string& name);

}  // namespace draftlab
