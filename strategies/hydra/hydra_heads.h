// HydraHeads - Hydra's sequentially dependent draft heads (Ankner et al. 2024, "Hydra: Sequentially-Dependent Draft
// Heads for Medusa Decoding", section 3; zankner/Hydra hydra/model/hydra_heads/mlp_head.py, "grounded" heads) on a
// frozen target.
//
// Like Medusa (medusa_heads.h), head k (0-based) reads f_t, the target's final normed hidden state at position t,
// and predicts t_{t+k+2}; unlike Medusa it also reads the tokens in between, so its guess depends on the candidate
// it extends. With E the target's input embedding (frozen) and x = [f_t, E(t_{t+1}), ..., E(t_{t+k+1})] of
// width (k + 2) d:
//   h = R_k x + r_k + SiLU(W_k x + b_k)          the official ResBlock(d, k + 1): W, R [d, (k + 2) d], b, r [d]
//   num_layers - 1 times: h = h + SiLU(W h + b)   ResBlock(d): W [d, d], b [d]
//   logits_k = lm_head_k(h)                       own [vocab, d] weight + [vocab] bias (official), or the target's
// At a draft's root t_{t+1} (the token just sampled, whose feature is not computed yet) head 0 reads f_t and the root
// and proposes the root's children; head 1 reads f_t, the root and a child, and proposes that child's children.
//
// Not here: Hydra++'s prefix attention layer (hydra_head_arch "prefix-mlp": one extra decoder layer over the target's
// features, with a KV cache of its own), "cross-attn" heads, and ungrounded heads (those are Medusa heads: use
// medusa). Hydra++'s teacher loss is a training option (parallel_head_training.h, --teacher).
//
// On disk: a folder with config.json and model.safetensors (or hydra_lm_head.safetensors).
//   config.json  "hydra_num_heads": K, "hydra_num_layers": L (>= 1, default 1), optional "hydra_head_arch" (must be
//                "mlp"), "grounded_heads" (must be true), "hidden_size" / "vocab_size" (checked against the target),
//                "draftlab_lm_head": "own" | "shared" (checked against the tensors when present)
//   weights      the HydraMLP state dict's names:
//                  hydra_mlp.{k}.0.linear.weight [d, (k+2) d], .bias [d]; hydra_mlp.{k}.0.res_connection.weight
//                  [d, (k+2) d], .bias [d]; hydra_mlp.{k}.{j}.linear.weight [d, d], .bias [d] for 1 <= j < L;
//                  hydra_lm_head.{k}.weight [vocab, d], .bias [vocab] (own LM heads only)
//                optionally under the prefix "hydra_head." (the model's attribute name).
// The official code builds the later blocks with `[ResBlock(d)] * (L - 1)`, one module repeated; here every block
// has its own weights (files with repeated tensors load the same).
//
// Cost per cycle: one batch of rows per tree depth (a row per parent node). The products go through libtorch on
// the compute device; the heads have no native-path kernels yet.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model/llama_model.h"

namespace draftlab {

struct HydraConfig {
  int64_t num_heads = 4;     // K
  int64_t num_layers = 1;    // ResBlocks per head, the first one the wide input block
  bool own_lm_head = false;  // each head's own LM head with bias (official), else the target's
};

// Row-major tensors as nn.Linear stores them, on the compute device in the compute dtype.
struct HydraHeadWeights {
  struct Linear {
    at::Tensor weight;  // [out, in]
    at::Tensor bias;    // [out]
  };
  struct Head {
    Linear input;                // ResBlock(d, k + 1).linear: [d, (k + 2) d]
    Linear residual;             // its res_connection: [d, (k + 2) d]
    std::vector<Linear> blocks;  // num_layers - 1 of [d, d]
    Linear lm_head;              // own: [vocab, d] and [vocab]; undefined when shared
  };
  std::vector<Head> heads;
};

// The one definition of a head's computation, differentiable (training, and inference off the native path).
// features [..., d], embeddings [..., (k + 1) d] (E of the k + 1 tokens after the feature's position, in order)
// -> head k's logits [..., vocab] (through its own LM head, or target_lm_head when shared).
at::Tensor hydra_head_logits(const HydraHeadWeights& w, int64_t k, const at::Tensor& features,
                             const at::Tensor& embeddings, const at::Tensor& target_lm_head);

class HydraHeads {
 public:
  // `target` supplies the embedding, the shared LM head and the compute options, and must outlive the heads. Throws
  // Error when the weights do not match the config or the target's sizes.
  HydraHeads(HydraConfig config, HydraHeadWeights weights, const LlamaModel& target);

  // Loads a head folder or a .safetensors file with config.json beside it (layout above). Throws Error naming the
  // file and the field or tensor: missing or unexpected tensors, wrong shapes, another target's sizes, an
  // architecture other than grounded "mlp" heads, a truncated or malformed file.
  static std::unique_ptr<HydraHeads> load(const std::string& path, const LlamaModel& target);

  // Heads drawn from `seed`, deterministic in it, in float32 on the CPU whatever the compute options. Biases and the
  // residual projection beyond the feature: nn.Linear's U(-1/sqrt(in), 1/sqrt(in)); the block weights normal(0,
  // weight_std) (0: the official zero init). The residual projection's feature part is the identity plus that
  // noise, so new heads start as Medusa's (h = f_t + ...) rather than as a random projection (the official init
  // is random there). Own LM heads: the target's weight, bias U(-1/sqrt(d), 1/sqrt(d)) (scaled by weight_std / 0.02
  // for tests' random heads, 0 for training's start).
  static std::unique_ptr<HydraHeads> random(const LlamaModel& target, uint64_t seed, HydraConfig config = {},
                                            double weight_std = 0.02);

  // Writes config.json and model.safetensors (the official names, unprefixed) in file_dtype.
  void save(const std::string& dir, at::ScalarType file_dtype = at::kFloat) const;

  // The tensor names and shapes of a checkpoint with this config, in file order.
  static std::vector<std::pair<std::string, std::vector<int64_t>>> checkpoint_tensors(const HydraConfig& config,
                                                                                      int64_t hidden, int64_t vocab);

  // Head k's logits [rows, vocab] float32 (CPU) at one feature row f_t ([d] or [1, d]), one row per token path:
  // paths holds rows x (k + 1) token ids back to back, each row t_{t+1} .. t_{t+k+1} (the draft's root first).
  at::Tensor logits(const at::Tensor& feature, int64_t k, const std::vector<int64_t>& paths) const;

  const HydraConfig& config() const { return config_; }
  const HydraHeadWeights& weights() const { return weights_; }
  int64_t num_heads() const { return config_.num_heads; }
  int64_t num_parameters() const;

 private:
  HydraConfig config_;
  HydraHeadWeights weights_;
  const LlamaModel& target_;
};

}  // namespace draftlab
