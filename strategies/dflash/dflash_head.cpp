#include "strategies/dflash/dflash_head.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/safetensors.h"
#include "core/model/checkpoint_tensor.h"
#include "core/io/head_folder.h"
#include "core/model/llama_layer.h"
#include "core/model/native_decoder.h"

namespace draftlab {

using json = nlohmann::json;

namespace {

at::ScalarType accumulate(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }


// The names of layer l's tensors in z-lab's layout, in DFlashLayerWeights' order.
std::vector<std::string> layer_keys(int64_t l) {
  const std::string p = "layers." + std::to_string(l) + ".";
  return {p + "input_layernorm.weight", p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
          p + "self_attn.v_proj.weight", p + "self_attn.o_proj.weight", p + "self_attn.q_norm.weight",
          p + "self_attn.k_norm.weight", p + "post_attention_layernorm.weight", p + "mlp.gate_proj.weight",
          p + "mlp.up_proj.weight", p + "mlp.down_proj.weight"};
}
std::vector<at::Tensor*> layer_tensors(DFlashLayerWeights& L) {
  return {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.q_norm, &L.k_norm, &L.mlp_norm, &L.w_gate, &L.w_up, &L.w_down};
}
std::vector<std::vector<int64_t>> layer_shapes(const ModelConfig& c) {
  const int64_t d = c.hidden_size, H = c.num_attention_heads, KVH = c.num_key_value_heads, hd = c.head_dim,
                I = c.intermediate_size;
  return {{d}, {H * hd, d}, {KVH * hd, d}, {KVH * hd, d}, {d, H * hd}, {hd}, {hd}, {d}, {I, d}, {I, d}, {d, I}};
}

// The draft layers' config for a target: its width, heads and vocabulary, `layers` layers.
ModelConfig layers_for(const ModelConfig& t, int64_t layers) {
  ModelConfig c = t;
  c.num_hidden_layers = layers;
  c.num_local_experts = 0;
  c.num_experts_per_tok = 0;
  if (t.mixture_of_experts()) c.intermediate_size = t.intermediate_size * t.num_experts_per_tok;
  c.pard_token = -1;
  return c;
}

}  // namespace

std::vector<int64_t> dflash_target_layer_ids(int64_t L, int64_t count) {
  if (count == 1) return {L / 2};
  std::vector<int64_t> ids;
  // z-lab's range, 1 .. L - 3; a target too shallow for it (test models) spreads over all its layers.
  const bool room = L - 3 > 1;
  const double start = room ? 1 : 0, span = static_cast<double>(room ? L - 3 : L - 1) - start;
  for (int64_t i = 0; i < count; ++i)
    ids.push_back(static_cast<int64_t>(std::llround(start + static_cast<double>(i) * span / static_cast<double>(count - 1))));
  return ids;
}

bool is_dflash_config(const json& j) {
  if (!j.contains("architectures") || !j.at("architectures").is_array()) return false;
  for (const auto& a : j.at("architectures"))
    if (a == "DFlashDraftModel") return true;
  return false;
}

void dflash_context(const DFlashConfig& c, const DFlashWeights& w, const RotaryEmbedding& rope,
                    const at::Tensor& features, const at::Tensor& positions, std::vector<at::Tensor>& keys,
                    std::vector<at::Tensor>& values, const LinearProjection& projection) {
  const auto project = [&](const at::Tensor& x, const at::Tensor& weight) {
    return projection ? projection(x, weight) : at::matmul(x, weight.t());
  };
  const ModelConfig& m = c.layers;
  const int64_t B = features.size(0), n = features.size(1), KVH = m.num_key_value_heads, hd = m.head_dim;
  const auto hidden = rms_norm(project(features.to(w.fc.scalar_type()), w.fc), w.hidden_norm, m.rms_norm_eps);
  const auto [cos, sin] = rope.at_positions(positions);
  keys.clear();
  values.clear();
  for (const DFlashLayerWeights& L : w.layers) {
    const auto k = rms_norm(project(hidden, L.wk).view({B, n, KVH, hd}), L.k_norm, m.rms_norm_eps);
    keys.push_back(RotaryEmbedding::apply(k, cos, sin));
    values.push_back(project(hidden, L.wv).view({B, n, KVH, hd}));
  }
}

at::Tensor dflash_blocks(const DFlashConfig& c, const DFlashWeights& w, const RotaryEmbedding& rope,
                         const at::Tensor& embeddings, const at::Tensor& positions,
                         const std::vector<at::Tensor>& context_keys, const std::vector<at::Tensor>& context_values,
                         const at::Tensor& mask, const LinearProjection& projection) {
  const auto project = [&](const at::Tensor& x, const at::Tensor& weight) {
    return projection ? projection(x, weight) : at::matmul(x, weight.t());
  };
  const ModelConfig& m = c.layers;
  const int64_t B = embeddings.size(0), Q = embeddings.size(1);
  const int64_t H = m.num_attention_heads, KVH = m.num_key_value_heads, hd = m.head_dim, G = H / KVH;
  const double eps = m.rms_norm_eps, scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const auto [cos, sin] = rope.at_positions(positions);
  at::Tensor h = embeddings.to(w.fc.scalar_type());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const DFlashLayerWeights& L = w.layers[l];
    const auto x = rms_norm(h, L.attn_norm, eps);
    const auto q = RotaryEmbedding::apply(rms_norm(project(x, L.wq).view({B, Q, H, hd}), L.q_norm, eps), cos, sin);
    const auto k = RotaryEmbedding::apply(rms_norm(project(x, L.wk).view({B, Q, KVH, hd}), L.k_norm, eps), cos, sin);
    const auto v = project(x, L.wv).view({B, Q, KVH, hd});
    // Context first, then the block; query head h reads kv head h / G (LlamaModel's grouping).
    auto keys = at::cat({context_keys[l], k}, 1);
    auto vals = at::cat({context_values[l], v}, 1);
    if (G > 1) {
      keys = keys.repeat_interleave(G, 2);
      vals = vals.repeat_interleave(G, 2);
    }
    // [B, H, Q, hd] x [B, H, hd, C + Q]: plain batched GEMMs (einsum's planning costs more than the math here).
    auto scores = at::matmul((q * scale).permute({0, 2, 1, 3}), keys.permute({0, 2, 3, 1}));
    if (mask.defined()) scores = scores + mask.to(scores.scalar_type());
    const auto probs = at::softmax(scores, -1, accumulate(scores)).to(q.scalar_type());
    const auto attn = at::matmul(probs, vals.permute({0, 2, 1, 3})).permute({0, 2, 1, 3}).reshape({B, Q, H * hd});
    h = h + project(attn, L.wo);
    const auto y = rms_norm(h, L.mlp_norm, eps);
    h = h + project(at::silu(project(y, L.w_gate)) * project(y, L.w_up), L.w_down);
  }
  return rms_norm(h, w.norm, eps);
}

DFlashHead::DFlashHead(DFlashConfig config, DFlashWeights weights, const LlamaModel& target)
    : config_(std::move(config)), weights_(std::move(weights)), target_(target), rope_(config_.layers, target.options()) {
  projections_.add(weights_.fc);
  for (const DFlashLayerWeights& L : weights_.layers)
    for (const at::Tensor* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) projections_.add(*w);
}

std::unique_ptr<DFlashHead> DFlashHead::random(const LlamaModel& target, uint64_t seed, int64_t layers,
                                               int64_t block_size, int64_t mask_token) {
  const ModelConfig& t = target.config();
  DFlashConfig c;
  c.layers = layers_for(t, layers);
  c.block_size = block_size;
  c.mask_token = mask_token >= 0 ? mask_token : t.vocab_size - 1;
  c.num_target_layers = t.num_hidden_layers;
  c.target_layer_ids = dflash_target_layer_ids(t.num_hidden_layers, std::min<int64_t>(5, t.num_hidden_layers));
  for (int64_t id : c.target_layer_ids)
    check(id >= 0 && id < t.num_hidden_layers, "DFlash: feature layer " + std::to_string(id) + " outside the target");
  const ComputeOptions& o = target.options();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t d = t.hidden_size, k = static_cast<int64_t>(c.target_layer_ids.size());
  auto normal = [&](std::vector<int64_t> shape) {
    return at::normal(0.0, 0.02, shape, gen, at::TensorOptions().dtype(at::kFloat)).to(o.device, o.dtype);
  };
  auto ones = [&](int64_t n) { return at::ones({n}, o.tensor_options()); };
  DFlashWeights w;
  w.fc = normal({d, k * d});
  w.hidden_norm = ones(d);
  for (int64_t l = 0; l < layers; ++l) {
    DFlashLayerWeights L;
    const auto shapes = layer_shapes(c.layers);
    const auto tensors = layer_tensors(L);
    for (size_t i = 0; i < tensors.size(); ++i)
      *tensors[i] = shapes[i].size() == 1 ? ones(shapes[i][0]) : normal(shapes[i]);
    w.layers.push_back(std::move(L));
  }
  w.norm = ones(d);
  return std::make_unique<DFlashHead>(std::move(c), std::move(w), target);
}

std::unique_ptr<DFlashHead> DFlashHead::load(const std::string& path, const LlamaModel& target) {
  const HeadFolder folder = open_head_folder(path, "DFlash draft", {"model.safetensors"}, "pytorch_model.bin");
  const json& j = folder.config;
  const std::string& cfg = folder.config_path;
  if (!is_dflash_config(j))
    throw Error::in_file(cfg, "architectures", "[\"DFlashDraftModel\"]", j.contains("architectures") ? j.at("architectures").dump() : "absent");
  const ModelConfig& t = target.config();
  check_head_sizes(folder, t.hidden_size, t.vocab_size);
  DFlashConfig c;
  json layers_json = j;
  if (layers_json.contains("rope_scaling") && layers_json.at("rope_scaling").is_null()) layers_json.erase("rope_scaling");
  layers_json["model_type"] = "llama";  // the Qwen3 fields DFlash uses are Llama's; q/k norms are read below
  layers_json.erase("architectures");
  c.layers = parse_hf_config(layers_json, cfg);
  c.block_size = head_config_int(folder, "block_size", 2, 16);
  c.num_target_layers = head_config_int(folder, "num_target_layers", 1, t.num_hidden_layers);
  if (!j.contains("dflash_config") || !j.at("dflash_config").is_object())
    throw Error::in_file(cfg, "dflash_config", "an object with mask_token_id and target_layer_ids", "absent");
  const json& dc = j.at("dflash_config");
  if (!dc.contains("mask_token_id") || !dc.at("mask_token_id").is_number_integer() ||
      dc.at("mask_token_id").get<int64_t>() < 0 || dc.at("mask_token_id").get<int64_t>() >= t.vocab_size)
    throw Error::in_file(cfg, "dflash_config.mask_token_id", "an id in [0, " + std::to_string(t.vocab_size) + ")",
                         dc.contains("mask_token_id") ? dc.at("mask_token_id").dump() : "absent");
  c.mask_token = dc.at("mask_token_id").get<int64_t>();
  if (dc.contains("target_layer_ids")) {
    const json& ids = dc.at("target_layer_ids");
    if (!ids.is_array() || ids.empty())
      throw Error::in_file(cfg, "dflash_config.target_layer_ids", "a non-empty list of target layers", ids.dump());
    for (const json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= t.num_hidden_layers)
        throw Error::in_file(cfg, "dflash_config.target_layer_ids",
                             "layers in [0, " + std::to_string(t.num_hidden_layers) + ") (the target's)", ids.dump());
      c.target_layer_ids.push_back(id.get<int64_t>());
    }
  } else {
    c.target_layer_ids = dflash_target_layer_ids(c.num_target_layers, c.layers.num_hidden_layers);
  }
  SafetensorsFile file(folder.weights);
  const ComputeOptions& o = target.options();
  const int64_t d = t.hidden_size, k = static_cast<int64_t>(c.target_layer_ids.size());
  std::set<std::string> expected;
  auto get = [&](const std::string& name, const std::vector<int64_t>& shape) {
    expected.insert(name);
    const TensorEntry* e = file.find(name);
    if (!e) throw Error::at(folder.weights, "tensor '" + name + "' not found (expected shape " + shape_string(shape) + ")");
    return checkpoint_tensor(*e, shape, o, " (from " + cfg + " and the target's hidden_size)");
  };
  DFlashWeights w;
  w.fc = get("fc.weight", {d, k * d});
  w.hidden_norm = get("hidden_norm.weight", {d});
  for (int64_t l = 0; l < c.layers.num_hidden_layers; ++l) {
    DFlashLayerWeights L;
    const auto keys = layer_keys(l);
    const auto shapes = layer_shapes(c.layers);
    const auto tensors = layer_tensors(L);
    for (size_t i = 0; i < keys.size(); ++i) *tensors[i] = get(keys[i], shapes[i]);
    w.layers.push_back(std::move(L));
  }
  w.norm = get("norm.weight", {d});
  for (const TensorEntry& e : file.tensors())
    if (!expected.count(e.name))
      throw Error::at(folder.weights, "unexpected tensor '" + e.name + "' (a DFlash draft of " +
                                          std::to_string(c.layers.num_hidden_layers) + " layers)");
  return std::make_unique<DFlashHead>(std::move(c), std::move(w), target);
}

void DFlashHead::save(const std::string& dir, at::ScalarType file_dtype) const {
  check(is_directory(dir), dir + ": not a directory");
  check(file_dtype == at::kFloat || file_dtype == at::kHalf || file_dtype == at::kBFloat16,
        "DFlashHead::save: file dtype must be float32, float16 or bfloat16");
  const std::string torch_dtype = file_dtype == at::kFloat ? "float32" : file_dtype == at::kHalf ? "float16" : "bfloat16";
  const DType st = file_dtype == at::kFloat ? DType::F32 : file_dtype == at::kHalf ? DType::F16 : DType::BF16;
  std::vector<at::Tensor> keep;
  std::vector<TensorToWrite> entries;
  auto add = [&](const std::string& name, const at::Tensor& t) {
    keep.push_back(t.detach().to(at::kCPU, file_dtype).contiguous());
    const at::Tensor& c = keep.back();
    entries.push_back({name, st, c.sizes().vec(), c.data_ptr(), static_cast<size_t>(c.nbytes())});
  };
  add("fc.weight", weights_.fc);
  add("hidden_norm.weight", weights_.hidden_norm);
  for (size_t l = 0; l < weights_.layers.size(); ++l) {
    DFlashLayerWeights L = weights_.layers[l];
    const auto keys = layer_keys(static_cast<int64_t>(l));
    const auto tensors = layer_tensors(L);
    for (size_t i = 0; i < keys.size(); ++i) add(keys[i], *tensors[i]);
  }
  add("norm.weight", weights_.norm);
  write_safetensors(dir + "/model.safetensors", entries, {{"format", "pt"}});

  const ModelConfig& m = config_.layers;
  json j;
  j["architectures"] = json::array({"DFlashDraftModel"});
  j["model_type"] = "qwen3";
  j["torch_dtype"] = torch_dtype;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["hidden_size"] = m.hidden_size;
  j["intermediate_size"] = m.intermediate_size;
  j["num_hidden_layers"] = m.num_hidden_layers;
  j["num_attention_heads"] = m.num_attention_heads;
  j["num_key_value_heads"] = m.num_key_value_heads;
  j["head_dim"] = m.head_dim;
  j["rms_norm_eps"] = m.rms_norm_eps;
  j["rope_theta"] = m.rope_theta;
  j["rope_scaling"] = nullptr;
  j["max_position_embeddings"] = m.max_position_embeddings;
  j["vocab_size"] = m.vocab_size;
  j["tie_word_embeddings"] = false;
  j["bos_token_id"] = m.bos_token_id;
  j["eos_token_id"] = m.eos_token_ids.size() == 1 ? json(m.eos_token_ids[0]) : json(m.eos_token_ids);
  j["layer_types"] = json(std::vector<std::string>(static_cast<size_t>(m.num_hidden_layers), "full_attention"));
  j["block_size"] = config_.block_size;
  j["num_target_layers"] = config_.num_target_layers;
  j["dflash_config"] = {{"mask_token_id", config_.mask_token}, {"target_layer_ids", config_.target_layer_ids}};
  write_file_atomically(dir + "/config.json", j.dump(2) + "\n");
}

DFlashHead::Context DFlashHead::make_context(int64_t capacity) const {
  const ModelConfig& m = config_.layers;
  Context c;
  for (size_t l = 0; l < weights_.layers.size(); ++l) {
    c.keys.push_back(at::zeros({1, capacity, m.num_key_value_heads, m.head_dim}, weights_.fc.options()));
    c.values.push_back(at::zeros({1, capacity, m.num_key_value_heads, m.head_dim}, weights_.fc.options()));
  }
  return c;
}

void DFlashHead::extend(Context& context, const at::Tensor& features) const {
  const int64_t n = features.size(0);
  if (n == 0) return;
  const int64_t capacity = context.keys.empty() ? 0 : context.keys[0].size(1);
  check(context.length + n <= capacity, "DFlash: context cache full (" + std::to_string(capacity) + " rows)");
  std::vector<at::Tensor> keys, values;
  const auto positions = at::arange(context.length, context.length + n, at::TensorOptions().dtype(at::kLong).device(weights_.fc.device()));
  const LinearProjection packed = projections_.bound();
  dflash_context(config_, weights_, rope_, features.to(weights_.fc.device(), weights_.fc.scalar_type()).unsqueeze(0),
                 positions, keys, values, packed);
  for (size_t l = 0; l < keys.size(); ++l) {
    context.keys[l].narrow(1, context.length, n).copy_(keys[l]);
    context.values[l].narrow(1, context.length, n).copy_(values[l]);
  }
  context.length += n;
}

at::Tensor DFlashHead::draft(const Context& context, int64_t token, int64_t block) const {
  at::NoGradGuard no_grad;
  const auto options = at::TensorOptions().dtype(at::kLong).device(weights_.fc.device());
  std::vector<int64_t> ids(static_cast<size_t>(block), config_.mask_token);
  ids[0] = token;
  const auto tokens = at::tensor(ids, at::kLong).to(weights_.fc.device());
  const auto embeddings = at::embedding(target_.embedding(), tokens).unsqueeze(0);
  const auto positions = at::arange(context.length, context.length + block, options);
  std::vector<at::Tensor> keys, values;
  for (size_t l = 0; l < context.keys.size(); ++l) {
    keys.push_back(context.keys[l].narrow(1, 0, context.length));
    values.push_back(context.values[l].narrow(1, 0, context.length));
  }
  const LinearProjection packed = projections_.bound();
  const auto hidden = dflash_blocks(config_, weights_, rope_, embeddings, positions, keys, values, {}, packed);
  const auto slots = hidden[0].narrow(0, 1, block - 1);
  // The target's LM head: its packed copy on the native path (a GEMM through libtorch would repack it every call).
  if (target_.native() && slots.device().is_cpu()) {
    const at::Tensor f = slots.to(at::kFloat).contiguous();
    return target_.native()->lm_head_logits(f.data_ptr<float>(), f.size(1), f.size(0));
  }
  return at::matmul(slots.to(target_.lm_head().scalar_type()), target_.lm_head().t()).to(at::kFloat);
}

}  // namespace draftlab
