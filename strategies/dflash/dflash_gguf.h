// A DFlash draft as the GGUF llama.cpp's `--spec-type draft-dflash` reads (architecture `dflash`, its
// models/dflash.cpp and common/speculative.cpp, b10256):
// - dflash.target_layers: the target layers whose INPUTS llama.cpp hands the draft (HF hidden_states[i]), so each of
//   the head's 0-based feature layers (whose outputs z-lab's layout names) plus one, in fc's column order;
// - dflash.block_size (B; llama.cpp's block is [last token, mask x min(--draft-max, B - 1)]) and
//   tokenizer.ggml.mask_token_id (the only place it reads the mask id; dflash.mask_token_id is written too);
// - the usual dflash.* hyperparameters of the draft's layers (one RMSNorm epsilon for every norm, RoPE theta);
// - the target's tokenizer: llama.cpp reads the draft's logits (the target's LM head) with the draft vocabulary's
//   row stride, so the vocabulary must be the target's, padded to its size;
// - tensors fc.weight, enc.output_norm.weight (hidden_norm), blk.N.{attn_norm, attn_q, attn_k (not permuted: NEOX
//   RoPE, the halves layout), attn_v, attn_output, attn_q_norm, attn_k_norm, ffn_norm, ffn_gate, ffn_up,
//   ffn_down}.weight and output_norm.weight, and nothing else (no token_embd or output: llama.cpp takes the
//   target's, and refuses any tensor it does not create).
#pragma once

#include <string>

#include "core/io/gguf.h"
#include "core/text/tokenizer.h"
#include "strategies/dflash/dflash_head.h"

namespace draftlab {

// Writes `path` atomically. Matrices as `type` (F32, F16, BF16, Q8_0, Q4_0), norms F32.
void export_dflash_gguf(const DFlashHead& head, const Tokenizer& tokenizer, const std::string& path, GgmlType type,
                        const std::string& name);

}  // namespace draftlab
