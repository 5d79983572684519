// MedusaHeads - Medusa-1's draft heads (Cai et al. 2024, section 2.1.1; FasterDecoding/Medusa
// medusa/model/medusa_model.py) on a frozen target.
//
// K heads read the same vector: f_t, the target's final normed hidden state at position t (LlamaModel::forward's
// `features`, the input of its LM head, which predicts t_{t+1}). Head k (0-based) predicts t_{t+k+2}:
//   h = f_t;  num_layers times: h = h + SiLU(W h + b)      W [d, d], b [d] (nn.Linear), its own per block
//   logits_k = lm_head_k(h)                                 the head's own [vocab, d] (no bias), or the target's
// So at the root of a draft (the sampled token t_{t+1}, whose own feature is not computed yet) head 0 proposes the
// root's children, head 1 its grandchildren, and so on; the heads never see the root token itself.
//
// LM head: the official heads each carry their own [vocab, d] projection, initialised as a copy of the target's.
// A shared head (the target's LM head, as the "Medusa-2" legacy variant and TensorRT-LLM's shared mode) stores K * d
// (d + 1) values instead of K * d * (d + 1 + vocab): the choice is recorded in config.json.
//
// On disk: a folder with config.json and safetensors weights.
//   config.json  "medusa_num_heads": K, "medusa_num_layers": L (default 1, as MedusaConfig), optional
//                "hidden_size" / "vocab_size" (checked against the target), "draftlab_lm_head": "own" | "shared"
//                (checked against the tensors when present; official files do not have it)
//   weights      model.safetensors, else medusa_lm_head.safetensors (or the .safetensors file given), holding
//                  medusa_head.{k}.{j}.linear.weight [d, d], medusa_head.{k}.{j}.linear.bias [d]   (j < L)
//                  medusa_head.{k}.{L}.weight [vocab, d]                                       (own LM heads only)
//                for every k < K; the prefix "medusa_head." may be absent (the v0.1 releases' medusa_lm_head.pt is
//                torch.save(medusa_head.state_dict()); `draftlab convert-head medusa_lm_head.pt DIR` turns it into
//                DIR/model.safetensors with those keys and copies config.json). The config's K is authoritative:
//                tensors of other heads are refused (a published v0.1 config may understate K; fix its number).
// save() writes config.json and model.safetensors with the prefixed keys (the v1.0 releases' names).
//
// The per-cycle cost is one feature row: K * L small [d, d] products and the LM-head products. On the native CPU
// path (when the target runs there) every matrix is packed like the target's (PackedMatrix), and a shared LM head is
// one pass of the target's packed LM head over all K rows at once (weights are streamed once for every row).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/model/llama_model.h"
#include "core/ops/packed_matrix.h"

namespace draftlab {

struct MedusaConfig {
  int64_t num_heads = 4;     // K (official default 5 in MedusaConfig, 4 in the default tree mc_sim_7b_63)
  int64_t num_layers = 1;    // residual blocks per head
  bool own_lm_head = false;  // each head's own [vocab, d] LM head (official), else the target's (shared)
};

// Row-major tensors as nn.Linear stores them ([out, in]), on the compute device in the compute dtype.
struct MedusaHeadWeights {
  struct Block {
    at::Tensor weight;  // [d, d]
    at::Tensor bias;    // [d]
  };
  std::vector<std::vector<Block>> blocks;  // [K][L]
  std::vector<at::Tensor> lm_heads;        // K x [vocab, d] with own LM heads; empty when shared
};

// The one definition of a head's computation, differentiable (training and the reference inference path):
// head k's last hidden state h for features [..., d], and its logits [..., vocab] (through lm_heads[k], or
// target_lm_head when the heads share it).
at::Tensor medusa_head_hidden(const MedusaHeadWeights& w, int64_t k, const at::Tensor& features);
at::Tensor medusa_head_logits(const MedusaHeadWeights& w, int64_t k, const at::Tensor& features,
                              const at::Tensor& target_lm_head);

class MedusaHeads {
 public:
  // `target` supplies the shared LM head and the compute options and must outlive the heads. Throws Error when the
  // weights do not match the config or the target's sizes. stored: how the checkpoint stores its weights (the
  // native path keeps that storage unless the target's options name one).
  MedusaHeads(MedusaConfig config, MedusaHeadWeights weights, const LlamaModel& target,
              WeightStorage stored = WeightStorage::Float32);
  ~MedusaHeads();

  // Loads a head folder or a .safetensors file with config.json beside it (layout above). Throws Error naming the
  // file and the field or tensor: missing or unexpected tensors, wrong shapes (with the expected one), a hidden or
  // vocabulary size other than the target's, a truncated or malformed file.
  static std::unique_ptr<MedusaHeads> load(const std::string& path, const LlamaModel& target);

  // Heads drawn from `seed`, deterministic in it: block weights normal(0, weight_std) (weight_std 0 gives the
  // official zero init, where each block starts as nearly the identity), biases U(-1/sqrt(d), 1/sqrt(d)) as
  // torch.nn.Linear draws them, own LM heads copied from the target's (as the official code initialises them).
  // Drawn in float32 on the CPU whatever the compute options. Tests use them as drafters (any heads must keep
  // decoding lossless); training starts from weight_std 0.
  static std::unique_ptr<MedusaHeads> random(const LlamaModel& target, uint64_t seed, MedusaConfig config = {},
                                             double weight_std = 0.02);

  // Writes config.json and model.safetensors (prefixed keys) in file_dtype (float32, float16 or bfloat16).
  void save(const std::string& dir, at::ScalarType file_dtype = at::kFloat) const;

  // The tensor names of a checkpoint with this config, in file order ("medusa_head.0.0.linear.weight", ...).
  static std::vector<std::string> checkpoint_keys(const MedusaConfig& config);

  // Logits [heads, vocab] float32 of the first `heads` heads (-1: all) at one feature row f_t ([d] or [1, d], any
  // device and dtype): row k is head k's prediction of t_{t+k+2}. On the CPU for the native path, else on the
  // compute device.
  at::Tensor logits(const at::Tensor& feature, int64_t heads = -1) const;

  const MedusaConfig& config() const { return config_; }
  const MedusaHeadWeights& weights() const { return weights_; }
  const LlamaModel& target() const { return target_; }
  int64_t num_heads() const { return config_.num_heads; }
  int64_t num_parameters() const;

 private:
  at::Tensor native_logits(const at::Tensor& feature, int64_t heads) const;

  // The heads packed for the native CPU path (present when the target runs there).
  struct Native {
    std::vector<std::vector<PackedMatrix>> w;         // [K][L]
    std::vector<std::vector<std::vector<float>>> b;   // [K][L] x d
    std::vector<PackedMatrix> lm_heads;               // own LM heads; empty when shared
    std::mutex mutex;                                 // one call at a time: the buffers are shared
    std::vector<float> h, y;                          // [K, d] hidden states, [d] block output
  };

  MedusaConfig config_;
  MedusaHeadWeights weights_;
  const LlamaModel& target_;
  std::unique_ptr<Native> native_;
};

}  // namespace draftlab
