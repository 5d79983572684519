#include "strategies/eagle/eagle_head.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/model/checkpoint_tensor.h"
#include "core/base/file_bytes.h"
#include "core/io/head_folder.h"
#include "core/io/safetensors.h"
#include "core/model/forward_clock.h"
#include "core/model/head_rows.h"
#include "core/model/host_tensor.h"
#include "core/model/llama_layer.h"
#include "core/ops/decoder_ops.h"

namespace draftlab {

namespace {

using nlohmann::json;

const char* const kInputKey = "draftlab_eagle_input";
const char* const kDraftVocabKey = "draft_vocab_size";

const char* const kAllInputs[] = {kEagleInputFeatureShiftedToken, kEagleInputFeatureUnshiftedToken,
                                  kEagleInputFeatureOnly, kEagleInputTokenOnly};

// Checks a draft vocabulary map: [K] int64, 1 <= K <= vocab, ids unique and in [0, vocab). Returns "" when fine,
// else what is wrong (the caller names the file or the call).
std::string d2t_problem(const at::Tensor& d2t, int64_t vocab) {
  if (d2t.dim() != 1 || d2t.scalar_type() != at::kLong)
    return "expected a 1-D int64 tensor, got " + shape_string(d2t.sizes().vec());
  const int64_t K = d2t.size(0);
  if (K < 1 || K > vocab) return "size " + std::to_string(K) + " outside [1, vocab_size " + std::to_string(vocab) + "]";
  const auto ids = d2t.to(at::kCPU).contiguous();
  const int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
  if (lo < 0 || hi >= vocab)
    return "target id " + std::to_string(lo < 0 ? lo : hi) + " outside the vocabulary [0, " + std::to_string(vocab) + ")";
  if (std::get<0>(at::_unique(ids)).size(0) != K) return "repeated target ids";
  return "";
}

// The head's RoPE table must cover every position the target can reach (a published head's config may say 2048
// for a target with a longer context); the frequencies do not depend on the table length.
ModelConfig rope_config(ModelConfig head, const LlamaModel& target) {
  head.max_position_embeddings = std::max(head.max_position_embeddings, target.config().max_position_embeddings);
  return head;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Checks the inputs of one head forward; cheap enough to run on every draft step.
void check_inputs(const ModelConfig& c, const KvCache& cache, const at::Tensor& tokens, const at::Tensor& features,
                  const at::Tensor& positions, int64_t max_positions) {
  check(tokens.dim() == 1 && tokens.size(0) > 0, "EagleHead::forward: tokens must be a non-empty 1-D tensor");
  const int64_t n = tokens.size(0);
  check(tokens.scalar_type() == at::kLong && positions.scalar_type() == at::kLong,
        "EagleHead::forward: tokens and positions must be int64");
  check(positions.dim() == 1 && positions.size(0) == n, "EagleHead::forward: positions must have one entry per token");
  check(features.dim() == 2 && features.size(0) == n && features.size(1) == c.hidden_size, [&] {
    return "EagleHead::forward: features must be [n, " + std::to_string(c.hidden_size) +
           "] for n = " + std::to_string(n) + ", got " + shape_string(features.sizes().vec());
  });
  cache.check_room(n);
  const auto [tmin, tmax] = min_max_of(tokens);
  if (tmin < 0 || tmax >= c.vocab_size)
    throw Error("EagleHead::forward: token id " + std::to_string(tmin < 0 ? tmin : tmax) + " outside the vocabulary [0, " +
                std::to_string(c.vocab_size) + ")");
  const auto [pmin, pmax] = min_max_of(positions);
  if (pmin < 0 || pmax >= max_positions)
    throw Error("EagleHead::forward: position " + std::to_string(pmin < 0 ? pmin : pmax) + " outside [0, " +
                std::to_string(max_positions) + ")");
}

}  // namespace

std::vector<std::string> eagle_input_variants() { return {std::begin(kAllInputs), std::end(kAllInputs)}; }

std::string eagle_input_names() {
  std::string s;
  for (const char* v : kAllInputs) s += (s.empty() ? "" : ", ") + std::string(v);
  return s;
}

bool is_eagle_input(const std::string& variant) {
  return std::any_of(std::begin(kAllInputs), std::end(kAllInputs), [&](const char* v) { return variant == v; });
}

int64_t eagle_fc_input_width(const std::string& variant, int64_t hidden_size) {
  check(is_eagle_input(variant),
        [&] { return "unknown EAGLE input variant '" + variant + "' (known: " + eagle_input_names() + ")"; });
  const bool two = variant == kEagleInputFeatureShiftedToken || variant == kEagleInputFeatureUnshiftedToken;
  return two ? 2 * hidden_size : hidden_size;
}

bool eagle_row_token_is_unshifted(const std::string& variant) { return variant == kEagleInputFeatureUnshiftedToken; }

at::Tensor eagle_fc_input(const std::string& variant, const at::Tensor& embedded, const at::Tensor& features) {
  if (variant == kEagleInputFeatureOnly) return features;
  if (variant == kEagleInputTokenOnly) return embedded;
  // Embedding first, then the feature: the order fc.weight was trained with (cnets1: cat((inputs_embeds, hidden))).
  return at::cat({embedded, features}, -1);
}

EagleHead::EagleHead(ModelConfig config, EagleHeadWeights weights, const LlamaModel& target, std::string input_variant,
                     at::Tensor d2t, WeightStorage stored)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      target_(target),
      input_variant_(std::move(input_variant)),
      rope_(rope_config(config_, target), target.options()) {
  check(config_.num_hidden_layers == 1,
        [&] { return "EagleHead: expected num_hidden_layers 1, got " + std::to_string(config_.num_hidden_layers); });
  check(config_.hidden_size == target.config().hidden_size && config_.vocab_size == target.config().vocab_size, [&] {
    return "EagleHead: hidden_size/vocab_size (" + std::to_string(config_.hidden_size) + "/" +
           std::to_string(config_.vocab_size) + ") differ from the target's (" +
           std::to_string(target.config().hidden_size) + "/" + std::to_string(target.config().vocab_size) + ")";
  });
  check(is_eagle_input(input_variant_), [&] {
    return "EagleHead: unknown input variant '" + input_variant_ + "' (known: " + eagle_input_names() + ")";
  });
  const int64_t fc_in = eagle_fc_input_width(input_variant_, config_.hidden_size);
  check(weights_.fc.dim() == 2 && weights_.fc.size(0) == config_.hidden_size && weights_.fc.size(1) == fc_in, [&] {
    return "EagleHead: fc must be [" + std::to_string(config_.hidden_size) + ", " + std::to_string(fc_in) +
           "] for input " + input_variant_ + ", got " + shape_string(weights_.fc.sizes().vec());
  });
  if (d2t.defined()) {
    const std::string problem = d2t_problem(d2t, config_.vocab_size);
    check(problem.empty(), [&] { return "EagleHead: draft vocabulary d2t: " + problem; });
    d2t_ = d2t.to(at::kCPU).contiguous().clone();
    d2t_device_ = d2t_.to(target.options().device);
    // Gathered once: the point of a reduced vocabulary is a draft LM head of K rows instead of vocab rows.
    draft_lm_head_ = column_major(target.lm_head().index_select(0, d2t_device_));
  }
  // Column-major projections: OpenBLAS's GEMV/small GEMM are faster on that layout (see llama_weights.h).
  weights_.fc = column_major(weights_.fc);
  weights_.layer.wqkv = column_major(weights_.layer.wqkv);
  weights_.layer.wo = column_major(weights_.layer.wo);
  weights_.layer.w_gate_up = column_major(weights_.layer.w_gate_up);
  weights_.layer.w_down = column_major(weights_.layer.w_down);
  if (const NativeDecoder* target_native = target.native()) {
    const WeightStorage storage = target.options().weights.value_or(stored);
    native_ = std::make_unique<Native>();
    const BlockDot dot = target.options().block_dot;  // ignored unless the storage is q8_0 / q4_0
    native_->fc = pack_matrix(weights_.fc, storage, dot);
    native_->fc_bias = float_vector(weights_.fc_bias);
    native_->layer = pack_layer(weights_.layer, storage, dot);
    // The target's LM head rows: stored as the target stores its own.
    if (draft_lm_head_.defined()) native_->draft_lm_head = pack_matrix(draft_lm_head_, target_native->storage(), target_native->dot());
  }
}

std::vector<std::string> EagleHead::checkpoint_keys(bool fc_bias, bool with_d2t) {
  std::vector<std::string> keys{"fc.weight"};
  if (fc_bias) keys.push_back("fc.bias");
  for (const char* k : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                        "self_attn.o_proj.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight",
                        "mlp.up_proj.weight", "mlp.down_proj.weight"})
    keys.push_back(std::string("layers.0.") + k);
  if (with_d2t) keys.push_back("d2t");
  return keys;
}

std::unique_ptr<EagleHead> EagleHead::load(const std::string& path, const LlamaModel& target) {
  if (!is_file(path) && !is_directory(path))
    throw Error::at(path, "not found (expected an EAGLE head folder with config.json and model.safetensors, or a "
                          ".safetensors file with config.json beside it)");
  const std::string config_path = head_config_path(path);
  const json j = read_head_config(config_path, "an EAGLE head needs config.json");
  ModelConfig config = parse_hf_config(j, config_path);
  // The head's layer is a dense Llama layer whatever the target (the official Mixtral head's config repeats the
  // target's expert fields).
  config.num_local_experts = config.num_experts_per_tok = 0;

  const ModelConfig& tc = target.config();
  check_head_fits_target(config_path, config.hidden_size, config.vocab_size, tc.hidden_size, tc.vocab_size);
  if (config.num_hidden_layers != 1)
    throw Error::in_file(config_path, "num_hidden_layers", "1 (an EAGLE-1/2 head is a single decoder layer)",
                         std::to_string(config.num_hidden_layers));
  // The official loader reads "bias" (default true) to build fc with or without a bias.
  bool bias = true;
  if (j.contains("bias") && !j.at("bias").is_null()) {
    if (!j.at("bias").is_boolean()) throw Error::in_file(config_path, "bias", "true or false", j.at("bias").dump());
    bias = j.at("bias").get<bool>();
  }
  std::string variant = kEagleInputFeatureShiftedToken;  // published heads carry no draftlab key
  if (j.contains(kInputKey) && !j.at(kInputKey).is_null()) {
    if (!j.at(kInputKey).is_string() || !is_eagle_input(j.at(kInputKey).get<std::string>()))
      throw Error::in_file(config_path, kInputKey, "one of " + eagle_input_names(), j.at(kInputKey).dump());
    variant = j.at(kInputKey).get<std::string>();
  }
  int64_t draft_vocab = 0;  // 0: the full vocabulary
  if (j.contains(kDraftVocabKey) && !j.at(kDraftVocabKey).is_null()) {
    const auto& v = j.at(kDraftVocabKey);
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > tc.vocab_size)
      throw Error::in_file(config_path, kDraftVocabKey, "an integer in [1, the target's vocab_size " +
                                                            std::to_string(tc.vocab_size) + "]", v.dump());
    draft_vocab = v.get<int64_t>();
  }

  SafetensorsCollection tensors(path);
  const std::string& source = tensors.description();
  const auto expected = checkpoint_keys(bias, draft_vocab > 0);
  const std::set<std::string> expected_set(expected.begin(), expected.end());
  for (const auto& name : tensors.names()) {
    if (expected_set.count(name) || name == "embed_tokens.weight" || ends_with(name, "rotary_emb.inv_freq")) continue;
    if (name == "layers.0.input_layernorm.weight")
      throw Error::at(source, "tensor 'layers.0.input_layernorm.weight': the EAGLE head's decoder layer has no input "
                              "RMSNorm (official cnets1.py, layer index 0); a head trained with one is a different "
                              "architecture that draftlab does not run");
    if (name == "fc.bias" && !bias)
      throw Error::at(source, "tensor 'fc.bias' present but " + config_path + " says \"bias\": false");
    if (name == "d2t")
      throw Error::at(source, "tensor 'd2t' (a draft vocabulary map) present but " + config_path + " has no \"" +
                                  kDraftVocabKey + "\"");
    throw Error::at(source, "unexpected tensor '" + name + "' (an EAGLE-1/2 head has: fc.weight, fc.bias, layers.0.*; "
                            "is this an EAGLE-3 or Medusa head?)");
  }

  const ComputeOptions& o = target.options();
  const int64_t d = config.hidden_size, hd = config.head_dim, H = config.num_attention_heads;
  const int64_t KVH = config.num_key_value_heads, I = config.intermediate_size;
  const std::string why = " (from " + config_path + ")";
  auto get = [&](const std::string& name, const std::vector<int64_t>& shape) {
    const TensorEntry* e = tensors.find(name);
    if (!e) throw Error::at(source, "tensor '" + name + "' not found (expected shape " + shape_string(shape) + ")");
    return checkpoint_tensor(*e, shape, o, why);
  };
  EagleHeadWeights w;
  w.fc = get("fc.weight", {d, eagle_fc_input_width(variant, d)});
  if (bias) w.fc_bias = get("fc.bias", {d});
  const std::string p = "layers.0.";
  w.layer.wqkv = at::cat({get(p + "self_attn.q_proj.weight", {H * hd, d}), get(p + "self_attn.k_proj.weight", {KVH * hd, d}),
                          get(p + "self_attn.v_proj.weight", {KVH * hd, d})},
                         0);
  w.layer.wo = get(p + "self_attn.o_proj.weight", {d, H * hd});
  w.layer.mlp_norm = get(p + "post_attention_layernorm.weight", {d});
  w.layer.w_gate_up = at::cat({get(p + "mlp.gate_proj.weight", {I, d}), get(p + "mlp.up_proj.weight", {I, d})}, 0);
  w.layer.w_down = get(p + "mlp.down_proj.weight", {d, I});
  at::Tensor d2t;
  if (draft_vocab > 0) {
    const TensorEntry* e = tensors.find("d2t");
    if (!e) throw Error::at(source, "tensor 'd2t' not found (" + config_path + " says draft_vocab_size " +
                                        std::to_string(draft_vocab) + ")");
    if (e->dtype != DType::I64 || e->shape != std::vector<int64_t>{draft_vocab})
      throw Error::at(source, "tensor 'd2t': expected I64 " + shape_string({draft_vocab}) + " (draft_vocab_size in " +
                                  config_path + "), got " + dtype_name(e->dtype) + " " + shape_string(e->shape));
    d2t = at::empty({draft_vocab}, at::kLong);
    std::memcpy(d2t.data_ptr(), e->data, e->nbytes);
    const std::string problem = d2t_problem(d2t, tc.vocab_size);
    if (!problem.empty()) throw Error::at(source, "tensor 'd2t': " + problem);
  }
  return std::make_unique<EagleHead>(std::move(config), std::move(w), target, variant, d2t,
                                     checkpoint_storage(tensors.find("fc.weight")));
}

ModelConfig EagleHead::config_for(const ModelConfig& target) {
  ModelConfig c = target;
  c.num_hidden_layers = 1;
  c.tie_word_embeddings = false;
  c.num_local_experts = c.num_experts_per_tok = 0;
  return c;
}

std::unique_ptr<EagleHead> EagleHead::random(const LlamaModel& target, uint64_t seed, const std::string& input_variant,
                                             at::Tensor d2t) {
  ModelConfig c = config_for(target.config());
  const ComputeOptions& o = target.options();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  // Drawn in float32 on the CPU whatever the compute options, so a seed means the same head everywhere.
  auto normal = [&](std::vector<int64_t> shape) {
    return at::normal(0.0, 0.02, shape, gen, at::TensorOptions().dtype(at::kFloat)).to(o.device, o.dtype);
  };
  const int64_t d = c.hidden_size, hd = c.head_dim, H = c.num_attention_heads, KVH = c.num_key_value_heads;
  const int64_t I = c.intermediate_size;
  EagleHeadWeights w;
  w.fc = normal({d, eagle_fc_input_width(input_variant, d)});
  w.fc_bias = at::zeros({d}, o.tensor_options());
  w.layer.wqkv = normal({(H + 2 * KVH) * hd, d});
  w.layer.wo = normal({d, H * hd});
  w.layer.mlp_norm = at::ones({d}, o.tensor_options());
  w.layer.w_gate_up = normal({2 * I, d});
  w.layer.w_down = normal({d, I});
  return std::make_unique<EagleHead>(std::move(c), std::move(w), target, input_variant, std::move(d2t));
}

void EagleHead::save(const std::string& dir, at::ScalarType file_dtype) const {
  check(is_directory(dir), [&] { return dir + ": not a directory"; });
  check(file_dtype == at::kFloat || file_dtype == at::kHalf || file_dtype == at::kBFloat16,
        "EagleHead::save: file dtype must be float32, float16 or bfloat16");
  const std::string torch_dtype = file_dtype == at::kFloat ? "float32" : file_dtype == at::kHalf ? "float16" : "bfloat16";
  const DType st = file_dtype == at::kFloat ? DType::F32 : file_dtype == at::kHalf ? DType::F16 : DType::BF16;
  auto out_t = [&](const at::Tensor& t) { return t.detach().to(at::kCPU, file_dtype).contiguous(); };
  const ModelConfig& c = config_;
  const int64_t hd = c.head_dim, H = c.num_attention_heads, KVH = c.num_key_value_heads, I = c.intermediate_size;
  const LlamaLayerWeights& L = weights_.layer;
  std::vector<std::pair<std::string, at::Tensor>> named{{"fc.weight", out_t(weights_.fc)}};
  if (weights_.fc_bias.defined()) named.emplace_back("fc.bias", out_t(weights_.fc_bias));
  named.emplace_back("layers.0.self_attn.q_proj.weight", out_t(L.wqkv.narrow(0, 0, H * hd)));
  named.emplace_back("layers.0.self_attn.k_proj.weight", out_t(L.wqkv.narrow(0, H * hd, KVH * hd)));
  named.emplace_back("layers.0.self_attn.v_proj.weight", out_t(L.wqkv.narrow(0, (H + KVH) * hd, KVH * hd)));
  named.emplace_back("layers.0.self_attn.o_proj.weight", out_t(L.wo));
  named.emplace_back("layers.0.post_attention_layernorm.weight", out_t(L.mlp_norm));
  named.emplace_back("layers.0.mlp.gate_proj.weight", out_t(L.w_gate_up.narrow(0, 0, I)));
  named.emplace_back("layers.0.mlp.up_proj.weight", out_t(L.w_gate_up.narrow(0, I, I)));
  named.emplace_back("layers.0.mlp.down_proj.weight", out_t(L.w_down));
  std::vector<TensorToWrite> entries;
  for (const auto& [name, t] : named)
    entries.push_back({name, st, t.sizes().vec(), t.data_ptr(), static_cast<size_t>(t.nbytes())});
  if (d2t_.defined())  // target ids, exact whatever the file dtype
    entries.push_back({"d2t", DType::I64, d2t_.sizes().vec(), d2t_.data_ptr(), static_cast<size_t>(d2t_.nbytes())});
  write_safetensors(dir + "/model.safetensors", entries, {{"format", "pt"}});

  json j = c.to_hf_json(torch_dtype);
  j["bias"] = weights_.fc_bias.defined();
  j[kInputKey] = input_variant_;
  if (d2t_.defined()) j[kDraftVocabKey] = d2t_.size(0);
  write_file_atomically(dir + "/config.json", j.dump(2) + "\n");
}

int64_t EagleHead::num_parameters() const {
  const LlamaLayerWeights& L = weights_.layer;
  int64_t n = weights_.fc.numel() + L.wqkv.numel() + L.wo.numel() + L.mlp_norm.numel() + L.w_gate_up.numel() +
              L.w_down.numel();
  if (weights_.fc_bias.defined()) n += weights_.fc_bias.numel();
  return n;
}

KvCache EagleHead::make_cache(int64_t capacity) const {
  return KvCache(1, config_.num_key_value_heads, config_.head_dim, capacity, target_.options());
}

std::vector<at::Tensor> EagleHead::forward_batch(const std::vector<Rows>& sequences) const {
  check(!sequences.empty(), "EagleHead::forward_batch: no sequences");
  std::vector<const KvCache*> caches;
  for (const Rows& s : sequences) caches.push_back(s.cache);
  check_distinct_caches(caches, "EagleHead::forward_batch");
  for (size_t b = 0; b < sequences.size(); ++b) {
    const Rows& s = sequences[b];
    check_inputs(config_, *s.cache, s.tokens, s.features, s.positions, rope_.max_positions());
    const int64_t n = s.tokens.size(0), T = s.cache->length() + n;
    if (s.visible.defined())
      check(s.visible.dim() == 2 && s.visible.size(0) == n && s.visible.size(1) == T, [&] {
        return "EagleHead::forward_batch: sequence " + std::to_string(b) + ": visible must be [n, cache rows + n] = [" +
               std::to_string(n) + ", " + std::to_string(T) + "], got " + shape_string(s.visible.sizes().vec());
      });
  }
  ForwardClock::Scope forward_clock;
  bool grad = false;
  for (const Rows& s : sequences)
    grad = grad || (at::GradMode::is_enabled() && (s.features.requires_grad() || weights_.fc.requires_grad()));
  if (native_ && !grad) return native_run(sequences);
  std::vector<at::Tensor> outs;
  for (const Rows& s : sequences) outs.push_back(reference_run(*s.cache, s.tokens, s.features, s.positions, s.visible));
  return outs;
}

at::Tensor EagleHead::reference_run(KvCache& cache, const at::Tensor& tokens, const at::Tensor& features,
                                    const at::Tensor& positions, const at::Tensor& visible) const {
  const ComputeOptions& o = target_.options();
  const int64_t n = tokens.size(0), start = cache.length();
  at::Tensor mask;  // additive: 0 where visible, -inf elsewhere; undefined = causal (attention_mask's)
  if (visible.defined())
    mask = at::zeros({n, start + n}, o.tensor_options())
               .masked_fill_(visible.to(o.device, at::kBool).logical_not(), -std::numeric_limits<float>::infinity());
  else
    mask = attention_mask({}, start, n, o);
  const auto [cos, sin] = rope_.at_positions(positions.to(o.device));
  at::Tensor embedded;  // feature_only reads no token: skip the lookup
  if (input_variant_ != kEagleInputFeatureOnly) embedded = at::embedding(target_.embedding(), tokens.to(o.device));
  auto x = project(eagle_fc_input(input_variant_, embedded, features.to(o.device, o.dtype)), weights_.fc);
  if (weights_.fc_bias.defined()) x = x + weights_.fc_bias;
  auto out = llama_decoder_layer(x, weights_.layer, config_, cache, /*layer=*/0, start, cos, sin, mask,
                                 /*input_norm=*/false);
  cache.advance_to(start + n);
  return out;
}

std::vector<at::Tensor> EagleHead::native_run(const std::vector<Rows>& sequences) const {
  std::lock_guard<std::mutex> lock(native_->mutex);
  const int64_t d = config_.hidden_size;
  int64_t n = 0, T_max = 0, visible_bytes = 0;
  for (const Rows& s : sequences) {
    const int64_t rows = s.tokens.size(0), T = s.cache->length() + rows;
    n += rows;
    T_max = std::max(T_max, T);
    if (s.visible.defined()) visible_bytes += rows * T;
  }
  NativeWorkspace& ws = native_->ws;
  ws.reserve(config_, n, T_max, visible_bytes);

  // fc's input rows, in eagle_fc_input's order (embedding first, then the feature), every sequence's in turn.
  const bool reads_token = input_variant_ != kEagleInputFeatureOnly, reads_feature = input_variant_ != kEagleInputTokenOnly;
  const int64_t width = native_->fc.in();
  std::vector<float>& in = native_->fc_input;
  in.resize(static_cast<size_t>(n * width));
  ws.segments.clear();
  int64_t row = 0;
  uint8_t* visible_at = ws.visible;
  for (const Rows& s : sequences) {
    const int64_t rows = s.tokens.size(0);
    const auto tokens = to_host(s.tokens, at::kLong);
    const auto positions = to_host(s.positions, at::kLong);
    const auto features = to_host(s.features, at::kFloat);
    const float* f = features.data_ptr<float>();
    float* x = in.data() + row * width;
    if (reads_token) target_.embedding_rows(tokens.data_ptr<int64_t>(), rows, x, width);  // no float32 embedding needed
    if (reads_feature)
      for (int64_t j = 0; j < rows; ++j)
        std::memcpy(x + j * width + (reads_token ? d : 0), f + j * d, d * sizeof(float));
    append_head_segment(ws, rope_, s.cache, row, rows, positions.data_ptr<int64_t>(), s.visible, visible_at);
    row += rows;
  }
  parallel_multiply(native_->fc, in.data(), width, n, ws.h, d);
  if (!native_->fc_bias.empty()) add_rows(ws.h, d, native_->fc_bias.data(), /*ldy=*/0, n, d);  // every row + bias

  native_decoder_layer(native_->layer, config_, ws.segments, /*layer=*/0, ws);
  std::vector<at::Tensor> outs;
  for (const RowSegment& s : ws.segments) {
    s.cache->advance_to(s.start + s.n);
    auto out = at::empty({s.n, d}, at::TensorOptions().dtype(at::kFloat));
    std::memcpy(out.data_ptr<float>(), ws.h + s.row * d, s.n * d * sizeof(float));
    outs.push_back(out);
  }
  return outs;
}

at::Tensor EagleHead::draft_logits(const at::Tensor& predicted_features) const {
  ForwardClock::Scope forward_clock;
  // No final norm: the head is trained so that its output goes straight into the target's LM head.
  if (native_ && !(at::GradMode::is_enabled() && predicted_features.requires_grad())) {
    const auto f = to_host(predicted_features, at::kFloat);
    const int64_t rows = f.size(0);
    if (native_->draft_lm_head.empty()) return target_.native()->lm_head_logits(f.data_ptr<float>(), f.size(1), rows);
    auto logits = at::empty({rows, native_->draft_lm_head.out()}, at::TensorOptions().dtype(at::kFloat));
    parallel_multiply(native_->draft_lm_head, f.data_ptr<float>(), f.size(1), rows, logits.data_ptr<float>(),
                      native_->draft_lm_head.out());
    return logits;
  }
  return project(predicted_features, d2t_.defined() ? draft_lm_head_ : target_.lm_head()).to(at::kFloat);
}

at::Tensor EagleHead::logits(const at::Tensor& predicted_features) const {
  if (!d2t_.defined()) return draft_logits(predicted_features);
  // Spread over the target vocabulary: -inf (probability 0) outside the draft vocabulary.
  const auto reduced = draft_logits(predicted_features);
  auto full = at::full({reduced.size(0), config_.vocab_size}, -std::numeric_limits<float>::infinity(), reduced.options());
  return full.index_copy_(1, d2t_device_, reduced);
}

}  // namespace draftlab
