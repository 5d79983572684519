// ModelConfig - the shape of a Llama-family model, from Hugging Face config.json or a llama2.c header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace draftlab {

// rope_scaling of type "llama3" (Llama 3.1+): frequencies below/above wavelength thresholds are rescaled.
struct RopeScaling {
  std::string type;  // "" = none, "llama3", "linear"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads when absent
  int64_t head_dim = 0;             // defaults to hidden_size / num_attention_heads when absent
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 2048;
  int64_t vocab_size = 0;
  bool tie_word_embeddings = false;
  int32_t bos_token_id = 1;
  std::vector<int32_t> eos_token_ids{2};  // config.json may give one id or a list
  // Mixture of experts (Mixtral, model_type "mixtral"): each layer's MLP is num_local_experts SwiGLU experts of
  // intermediate_size, of which a router picks num_experts_per_tok per token. 0 = a dense Llama MLP.
  int64_t num_local_experts = 0;
  int64_t num_experts_per_tok = 0;
  double router_aux_loss_coef = 0.0;  // training only: weight of the load-balancing loss
  // A PARD parallel draft (AMD-AGI/PARD's config field; train-lm --parallel): the mask id appended K - 1 times to
  // draft K tokens in one forward. -1 = an ordinary language model.
  int32_t pard_token = -1;

  bool mixture_of_experts() const { return num_local_experts > 0; }

  // Throws Error "<source>: <field>: expected ..., got ..." for non-positive sizes, heads that do not divide, etc.
  void validate(const std::string& source) const;

  // Hugging Face config.json of LlamaForCausalLM (architectures, model_type "llama", torch_dtype given), or of
  // MixtralForCausalLM for a mixture of experts.
  nlohmann::json to_hf_json(const std::string& torch_dtype = "float32") const;
};

// Parses config.json content. `source` names the file in error messages. Required keys: hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads, vocab_size; a missing one is an Error naming it.
ModelConfig parse_hf_config(const nlohmann::json& j, const std::string& source);
ModelConfig load_hf_config(const std::string& path);

}  // namespace draftlab
