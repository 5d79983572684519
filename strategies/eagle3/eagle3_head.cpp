#include "strategies/eagle3/eagle3_head.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/safetensors.h"
#include "core/model/checkpoint_tensor.h"
#include "core/model/forward_clock.h"
#include "core/io/head_folder.h"
#include "core/model/head_rows.h"
#include "core/model/host_tensor.h"
#include "core/model/llama_layer.h"
#include "core/ops/decoder_ops.h"
#include "strategies/eagle3/draft_to_target.h"

namespace draftlab {

namespace {

using nlohmann::json;

const char* const kLayersKey = "draftlab_feature_layers";
const char* const kFcNorm = "fc_norm";          // EAGLE-3.1 flags (Eagle3HeadWeights)
const char* const kNormOutput = "norm_output";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string layers_text(const std::vector<int64_t>& layers) {
  std::string s = "[";
  for (size_t i = 0; i < layers.size(); ++i) s += (i ? ", " : "") + std::to_string(layers[i]);
  return s + "]";
}


// An EAGLE-3 head's config.json, checked against its target: the head's shape, its draft vocabulary size and the
// target layers it fuses.
struct Eagle3Config {
  std::string path;  // the config.json
  ModelConfig model;
  int64_t draft_vocab = 0;
  std::vector<int64_t> input_layers;
  bool fc_norm = false, norm_output = false;  // EAGLE-3.1
};

// An optional boolean key: absent or null is false.
bool flag(const json& j, const char* key, const std::string& config_path) {
  if (!j.contains(key) || j.at(key).is_null()) return false;
  if (!j.at(key).is_boolean()) throw Error::in_file(config_path, key, "true or false", j.at(key).dump());
  return j.at(key).get<bool>();
}

// Three target layer indices in [lo, lo + L - 1] from a config value, as the input layers (value + shift).
std::vector<int64_t> layer_list(const json& v, int64_t shift, int64_t L, const std::string& config_path,
                                const std::string& key) {
  bool ok = v.is_array() && v.size() == 3;
  for (size_t i = 0; ok && i < 3; ++i)
    ok = v[i].is_number_integer() && v[i].get<int64_t>() + shift >= 1 && v[i].get<int64_t>() + shift <= L;
  if (!ok)
    throw Error::in_file(config_path, key,
                         "three target layer indices in [" + std::to_string(1 - shift) + ", " +
                             std::to_string(L - shift) + "]",
                         v.dump());
  return {v[0].get<int64_t>() + shift, v[1].get<int64_t>() + shift, v[2].get<int64_t>() + shift};
}

Eagle3Config read_eagle3_config(const std::string& head_path, const ModelConfig& tc) {
  const std::string config_path = head_config_path(head_path);
  const json j = read_head_config(config_path, "an EAGLE-3 head needs config.json");
  // The official class reads num_hidden_layers nowhere (its single layer is fixed): do not let the parser check it.
  json shape = j;
  shape["num_hidden_layers"] = 1;
  ModelConfig config = parse_hf_config(shape, config_path);
  config.num_local_experts = config.num_experts_per_tok = 0;
  check_head_fits_target(config_path, config.hidden_size, config.vocab_size, tc.hidden_size, tc.vocab_size);
  if (j.contains("target_hidden_size") && !j.at("target_hidden_size").is_null() &&
      j.at("target_hidden_size") != json(tc.hidden_size))
    throw Error::in_file(config_path, "target_hidden_size",
                         "absent or the target's hidden_size " + std::to_string(tc.hidden_size) +
                             " (heads narrower than their target are not supported)",
                         j.at("target_hidden_size").dump());
  if (!config.rope_scaling.type.empty())
    throw Error::in_file(config_path, "rope_scaling", "null (official EAGLE-3 heads run plain RoPE)",
                         config.rope_scaling.type);
  if (!j.contains("draft_vocab_size") || !j.at("draft_vocab_size").is_number_integer())
    throw Error::in_file(config_path, "draft_vocab_size", "an integer (required for an EAGLE-3 head)",
                         j.contains("draft_vocab_size") ? j.at("draft_vocab_size").dump() : "no such key");
  const int64_t Vd = j.at("draft_vocab_size").get<int64_t>(), V = tc.vocab_size;
  if (Vd < 1 || Vd > V)
    throw Error::in_file(config_path, "draft_vocab_size", "an integer in [1, vocab_size " + std::to_string(V) + "]",
                         std::to_string(Vd));
  // Which layers: draftlab's key (input layers), else SpecForge's / SGLang's (layers whose outputs are captured).
  std::vector<int64_t> layers = eagle3_input_layers(tc.num_hidden_layers);
  const char* const aux = "eagle_aux_hidden_state_layer_ids";
  if (j.contains(kLayersKey))
    layers = layer_list(j.at(kLayersKey), 0, tc.num_hidden_layers, config_path, kLayersKey);
  else if (j.contains("eagle_config") && j.at("eagle_config").is_object() && j.at("eagle_config").contains(aux))
    layers = layer_list(j.at("eagle_config").at(aux), 1, tc.num_hidden_layers, config_path,
                        std::string("eagle_config.") + aux);
  return {config_path, std::move(config), Vd, layers, flag(j, kFcNorm, config_path), flag(j, kNormOutput, config_path)};
}

}  // namespace

at::Tensor eagle3_fc_input(const at::Tensor& G, const Eagle3HeadWeights& w, double eps) {
  if (w.fc_norm.empty()) return G;
  const int64_t d = G.size(-1) / 3;
  std::vector<at::Tensor> parts;
  for (int64_t k = 0; k < 3; ++k) parts.push_back(rms_norm(G.narrow(-1, k * d, d), w.fc_norm[k], eps));
  return at::cat(parts, -1);
}

std::vector<int64_t> eagle3_input_layers(int64_t L) {
  if (L >= 7) return {2, L / 2, L - 3};
  return {1, std::max<int64_t>(1, L / 2), std::max<int64_t>(1, L - 1)};
}

Eagle3Head::Eagle3Head(ModelConfig config, Eagle3HeadWeights weights, const LlamaModel& target, at::Tensor draft_ids,
                       std::vector<int64_t> input_layers, WeightStorage stored)
    : config_(std::move(config)), weights_(std::move(weights)), target_(target), input_layers_(std::move(input_layers)),
      rope_([&] {
        ModelConfig c = config_;  // the table must reach every position the target can
        c.max_position_embeddings = std::max(c.max_position_embeddings, target.config().max_position_embeddings);
        return c;
      }(), target.options()) {
  const ModelConfig& tc = target.config();
  const int64_t d = config_.hidden_size, V = config_.vocab_size;
  check(d == tc.hidden_size && V == tc.vocab_size, [&] {
    return "Eagle3Head: hidden_size/vocab_size (" + std::to_string(d) + "/" + std::to_string(V) +
           ") differ from the target's (" + std::to_string(tc.hidden_size) + "/" + std::to_string(tc.vocab_size) + ")";
  });
  check(input_layers_.size() == 3, "Eagle3Head: expected three feature layers (low, middle, high)");
  for (int64_t l : input_layers_)
    check(l >= 1 && l <= tc.num_hidden_layers, [&] {
      return "Eagle3Head: feature layers " + layers_text(input_layers_) + ": each must be a target layer whose input "
             "is read, in [1, " + std::to_string(tc.num_hidden_layers) + "]";
    });
  const int64_t H = config_.num_attention_heads, KVH = config_.num_key_value_heads, hd = config_.head_dim;
  auto expect = [&](const at::Tensor& t, std::vector<int64_t> shape, const char* name) {
    check(t.defined() && t.sizes().vec() == shape, [&] {
      return std::string("Eagle3Head: ") + name + " must be " + shape_string(shape) + ", got " +
             (t.defined() ? shape_string(t.sizes().vec()) : std::string("nothing"));
    });
  };
  expect(weights_.fc, {d, 3 * d}, "fc");
  expect(weights_.input_norm, {d}, "input_layernorm");
  expect(weights_.hidden_norm, {d}, "hidden_norm");
  expect(weights_.layer.wqkv, {(H + 2 * KVH) * hd, 2 * d}, "q/k/v (fused)");
  expect(weights_.norm, {d}, "norm");
  check(weights_.fc_norm.empty() || weights_.fc_norm.size() == 3, "Eagle3Head: fc_norm must be three norms or none");
  for (const auto& g : weights_.fc_norm) expect(g, {d}, "fc_norm");
  check(weights_.lm_head.dim() == 2 && weights_.lm_head.size(1) == d, "Eagle3Head: lm_head must be [V_d, d]");
  const int64_t Vd = weights_.lm_head.size(0);
  if (draft_ids.defined()) {
    const std::string problem = draft_ids_problem(draft_ids, V);
    check(problem.empty(), [&] { return "Eagle3Head: draft vocabulary: " + problem; });
    check(draft_ids.size(0) == Vd, [&] {
      return "Eagle3Head: " + std::to_string(draft_ids.size(0)) + " draft ids for an lm_head of " + std::to_string(Vd) +
             " rows";
    });
    // A full vocabulary in order is the identity: no spreading needed.
    if (Vd < V) {
      draft_ids_ = draft_ids.to(at::kCPU).contiguous().clone();
      draft_ids_device_ = draft_ids_.to(target.options().device);
    }
  } else {
    check(Vd == V, [&] {
      return "Eagle3Head: an lm_head of " + std::to_string(Vd) + " rows needs draft ids (d2t) for the vocabulary of " +
             std::to_string(V);
    });
  }
  // Column-major projections for the reference path's GEMMs (llama_weights.h).
  weights_.fc = column_major(weights_.fc);
  weights_.lm_head = column_major(weights_.lm_head);
  use_column_major(weights_.layer);
  if (target.native() != nullptr) {
    const WeightStorage storage = target.options().weights.value_or(stored);
    const BlockDot dot = target.options().block_dot;
    native_ = std::make_unique<Native>();
    native_->fc = pack_matrix(weights_.fc, storage, dot);
    native_->lm_head = pack_matrix(weights_.lm_head, storage, dot);
    native_->layer = pack_layer(weights_.layer, storage, dot);
    native_->input_norm = float_vector(weights_.input_norm);
    native_->hidden_norm = float_vector(weights_.hidden_norm);
    native_->norm = float_vector(weights_.norm);
    for (const auto& g : weights_.fc_norm) native_->fc_norm.push_back(float_vector(g));
  }
}

std::vector<int64_t> Eagle3Head::target_feature_layers() const {
  std::vector<int64_t> after;
  for (int64_t l : input_layers_) after.push_back(l - 1);  // the input of layer l is the output of layer l - 1
  return after;
}

std::vector<std::string> Eagle3Head::checkpoint_keys() {
  return {"fc.weight",
          "midlayer.hidden_norm.weight",
          "midlayer.input_layernorm.weight",
          "midlayer.post_attention_layernorm.weight",
          "midlayer.self_attn.q_proj.weight",
          "midlayer.self_attn.k_proj.weight",
          "midlayer.self_attn.v_proj.weight",
          "midlayer.self_attn.o_proj.weight",
          "midlayer.mlp.gate_proj.weight",
          "midlayer.mlp.up_proj.weight",
          "midlayer.mlp.down_proj.weight",
          "norm.weight",
          "lm_head.weight",
          "d2t",
          "t2d"};
}

std::unique_ptr<Eagle3Head> Eagle3Head::load(const std::string& path, const LlamaModel& target) {
  if (!is_file(path) && !is_directory(path))
    throw Error::at(path, "not found (expected an EAGLE-3 head folder with config.json and model.safetensors, or a "
                          ".safetensors file with config.json beside it)");
  Eagle3Config c = read_eagle3_config(path, target.config());
  ModelConfig& config = c.model;
  const int64_t Vd = c.draft_vocab, V = target.config().vocab_size;
  SafetensorsCollection tensors(path);
  const std::string& source = tensors.description();
  auto keys = checkpoint_keys();
  if (c.fc_norm)
    for (int k = 0; k < 3; ++k) keys.push_back("fc_norm." + std::to_string(k) + ".weight");
  const std::set<std::string> known(keys.begin(), keys.end());
  // Each official name -> the file's: other writers prefix "model." or spell the layer "layers.0.".
  std::map<std::string, std::string> file_name;
  for (const auto& name : tensors.names()) {
    std::string official = name.rfind("model.", 0) == 0 ? name.substr(6) : name;
    if (official.rfind("layers.0.", 0) == 0) official = "midlayer." + official.substr(9);
    if (known.count(official)) {
      if (!file_name.emplace(official, name).second)
        throw Error::at(source, "tensors '" + file_name[official] + "' and '" + name + "' are both " + official);
      continue;
    }
    if (official == "embed_tokens.weight" || ends_with(name, "rotary_emb.inv_freq")) continue;
    throw Error::at(source, "unexpected tensor '" + name + "' (an EAGLE-3 head has: fc.weight, midlayer.*, " +
                                "norm.weight, lm_head.weight, d2t, t2d, and fc_norm.{0,1,2}.weight when " +
                                c.path + " says \"fc_norm\": true (EAGLE-3.1); norm_before_fc belongs to other " +
                                "variants, layers.N.* beyond layer 0 to an EAGLE-1/2 head)");
  }
  const ComputeOptions& o = target.options();
  const int64_t d = config.hidden_size, hd = config.head_dim, H = config.num_attention_heads;
  const int64_t KVH = config.num_key_value_heads, I = config.intermediate_size;
  const std::string why = " (from " + c.path + ")";
  auto get = [&](const std::string& name, const std::vector<int64_t>& expected) {
    const auto it = file_name.find(name);
    if (it == file_name.end())
      throw Error::at(source, "tensor '" + name + "' not found (expected shape " + shape_string(expected) + ")");
    return checkpoint_tensor(*tensors.find(it->second), expected, o, why);
  };
  Eagle3HeadWeights w;
  const std::string m = "midlayer.";
  w.fc = get("fc.weight", {d, 3 * d});
  w.hidden_norm = get(m + "hidden_norm.weight", {d});
  w.input_norm = get(m + "input_layernorm.weight", {d});
  w.layer.mlp_norm = get(m + "post_attention_layernorm.weight", {d});
  w.layer.wqkv = at::cat({get(m + "self_attn.q_proj.weight", {H * hd, 2 * d}),
                          get(m + "self_attn.k_proj.weight", {KVH * hd, 2 * d}),
                          get(m + "self_attn.v_proj.weight", {KVH * hd, 2 * d})},
                         0);
  w.layer.wo = get(m + "self_attn.o_proj.weight", {d, H * hd});
  w.layer.w_gate_up = at::cat({get(m + "mlp.gate_proj.weight", {I, d}), get(m + "mlp.up_proj.weight", {I, d})}, 0);
  w.layer.w_down = get(m + "mlp.down_proj.weight", {d, I});
  w.norm = get("norm.weight", {d});
  w.lm_head = get("lm_head.weight", {Vd, d});
  if (c.fc_norm)
    for (int k = 0; k < 3; ++k) w.fc_norm.push_back(get("fc_norm." + std::to_string(k) + ".weight", {d}));
  w.norm_output = c.norm_output;

  const at::Tensor ids = read_draft_ids(tensors, Vd, V);
  check_target_to_draft(tensors, ids, V);
  return std::make_unique<Eagle3Head>(std::move(config), std::move(w), target, ids, c.input_layers,
                                      checkpoint_storage(tensors.find(file_name.at("fc.weight"))));
}

ModelConfig Eagle3Head::config_for(const ModelConfig& target) {
  ModelConfig c = target;
  c.num_hidden_layers = 1;
  c.tie_word_embeddings = false;
  c.num_local_experts = c.num_experts_per_tok = 0;
  c.rope_theta = 10000.0;  // the official trainer's, whatever the target's (spec 1.6)
  c.rope_scaling = RopeScaling{};
  return c;
}

std::unique_ptr<Eagle3Head> Eagle3Head::random(const LlamaModel& target, uint64_t seed, int64_t draft_vocab,
                                               at::Tensor draft_ids, std::vector<int64_t> input_layers, bool eagle31) {
  ModelConfig c = config_for(target.config());
  const ComputeOptions& o = target.options();
  const int64_t d = c.hidden_size, hd = c.head_dim, H = c.num_attention_heads, KVH = c.num_key_value_heads;
  const int64_t I = c.intermediate_size, V = c.vocab_size;
  check(draft_vocab >= 0 && draft_vocab <= V, [&] {
    return "Eagle3Head::random: draft vocabulary " + std::to_string(draft_vocab) + " outside [0, " + std::to_string(V) +
           "]";
  });
  if (draft_ids.defined()) draft_vocab = draft_ids.size(0);
  const int64_t Vd = draft_vocab == 0 ? V : draft_vocab;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto normal = [&](std::vector<int64_t> shape) {  // float32 on the CPU: a seed means the same head everywhere
    return at::normal(0.0, 0.02, shape, gen, at::TensorOptions().dtype(at::kFloat)).to(o.device, o.dtype);
  };
  Eagle3HeadWeights w;
  w.fc = normal({d, 3 * d});
  w.input_norm = at::ones({d}, o.tensor_options());
  w.hidden_norm = at::ones({d}, o.tensor_options());
  w.layer.wqkv = normal({(H + 2 * KVH) * hd, 2 * d});
  w.layer.wo = normal({d, H * hd});
  w.layer.mlp_norm = at::ones({d}, o.tensor_options());
  w.layer.w_gate_up = normal({2 * I, d});
  w.layer.w_down = normal({d, I});
  w.norm = at::ones({d}, o.tensor_options());
  w.lm_head = normal({Vd, d});
  if (eagle31) {
    for (int k = 0; k < 3; ++k) w.fc_norm.push_back(at::ones({d}, o.tensor_options()));
    w.norm_output = true;
  }
  at::Tensor ids = draft_ids;
  if (!ids.defined() && Vd < V)
    ids = std::get<0>(at::randperm(V, gen, at::TensorOptions().dtype(at::kLong)).narrow(0, 0, Vd).sort());
  if (input_layers.empty()) input_layers = eagle3_input_layers(target.config().num_hidden_layers);
  return std::make_unique<Eagle3Head>(std::move(c), std::move(w), target, ids, std::move(input_layers));
}

void Eagle3Head::save(const std::string& dir, at::ScalarType file_dtype) const {
  check(is_directory(dir), [&] { return dir + ": not a directory"; });
  check(file_dtype == at::kFloat || file_dtype == at::kHalf || file_dtype == at::kBFloat16,
        "Eagle3Head::save: file dtype must be float32, float16 or bfloat16");
  const std::string torch_dtype = file_dtype == at::kFloat ? "float32" : file_dtype == at::kHalf ? "float16" : "bfloat16";
  const DType st = file_dtype == at::kFloat ? DType::F32 : file_dtype == at::kHalf ? DType::F16 : DType::BF16;
  auto out_t = [&](const at::Tensor& t) { return t.detach().to(at::kCPU, file_dtype).contiguous(); };
  const ModelConfig& c = config_;
  const int64_t hd = c.head_dim, H = c.num_attention_heads, KVH = c.num_key_value_heads, I = c.intermediate_size;
  const int64_t V = c.vocab_size, Vd = draft_vocab_size();
  const LlamaLayerWeights& L = weights_.layer;
  const std::vector<at::Tensor> values{out_t(weights_.fc),
                                       out_t(weights_.hidden_norm),
                                       out_t(weights_.input_norm),
                                       out_t(L.mlp_norm),
                                       out_t(L.wqkv.narrow(0, 0, H * hd)),
                                       out_t(L.wqkv.narrow(0, H * hd, KVH * hd)),
                                       out_t(L.wqkv.narrow(0, (H + KVH) * hd, KVH * hd)),
                                       out_t(L.wo),
                                       out_t(L.w_gate_up.narrow(0, 0, I)),
                                       out_t(L.w_gate_up.narrow(0, I, I)),
                                       out_t(L.w_down),
                                       out_t(weights_.norm),
                                       out_t(weights_.lm_head)};
  const auto keys = checkpoint_keys();
  std::vector<TensorToWrite> entries;
  for (size_t i = 0; i < values.size(); ++i)
    entries.push_back({keys[i], st, values[i].sizes().vec(), values[i].data_ptr(), static_cast<size_t>(values[i].nbytes())});
  std::vector<at::Tensor> fc_norm;
  for (size_t k = 0; k < weights_.fc_norm.size(); ++k) {
    fc_norm.push_back(out_t(weights_.fc_norm[k]));
    entries.push_back({"fc_norm." + std::to_string(k) + ".weight", st, {fc_norm.back().size(0)},
                       fc_norm.back().data_ptr(), static_cast<size_t>(fc_norm.back().nbytes())});
  }
  const auto [d2t, t2d] = draft_to_target_tensors(draft_ids_, Vd, V);
  entries.push_back({"d2t", DType::I64, {Vd}, d2t.data_ptr(), static_cast<size_t>(d2t.nbytes())});
  entries.push_back({"t2d", DType::BOOL, {V}, t2d.data_ptr(), static_cast<size_t>(t2d.nbytes())});
  write_safetensors(dir + "/model.safetensors", entries, {{"format", "pt"}});

  json j = c.to_hf_json(torch_dtype);
  j["architectures"] = json::array({"LlamaForCausalLMEagle3"});
  j["draft_vocab_size"] = Vd;
  j[kLayersKey] = input_layers_;
  std::vector<int64_t> captured;  // SpecForge / SGLang: the layers whose outputs are captured
  for (int64_t l : input_layers_) captured.push_back(l - 1);
  j["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", captured}, {"use_aux_hidden_state", true}};
  if (is_eagle31()) {
    j[kFcNorm] = !weights_.fc_norm.empty();
    j[kNormOutput] = weights_.norm_output;
  }
  write_file_atomically(dir + "/config.json", j.dump(2) + "\n");
}

int64_t Eagle3Head::num_parameters() const {
  const LlamaLayerWeights& L = weights_.layer;
  return weights_.fc.numel() + weights_.input_norm.numel() + weights_.hidden_norm.numel() + L.wqkv.numel() +
         L.wo.numel() + L.mlp_norm.numel() + L.w_gate_up.numel() + L.w_down.numel() + weights_.norm.numel() +
         weights_.lm_head.numel() + static_cast<int64_t>(weights_.fc_norm.size()) * config_.hidden_size;
}

KvCache Eagle3Head::make_cache(int64_t capacity) const {
  return KvCache(1, config_.num_key_value_heads, config_.head_dim, capacity, target_.options());
}

void Eagle3Head::check_rows(const Rows& r, const char* what) const {
  const int64_t d = config_.hidden_size;
  check(r.cache != nullptr, [&] { return std::string(what) + ": no cache"; });
  check(r.tokens.dim() == 1 && r.tokens.size(0) > 0 && r.tokens.scalar_type() == at::kLong,
        [&] { return std::string(what) + ": tokens must be a non-empty 1-D int64 tensor"; });
  const int64_t n = r.tokens.size(0), T = r.cache->length() + n;
  check(r.positions.dim() == 1 && r.positions.size(0) == n && r.positions.scalar_type() == at::kLong,
        [&] { return std::string(what) + ": positions must be int64, one per token"; });
  check(r.features.dim() == 2 && r.features.size(0) == n && (r.features.size(1) == d || r.features.size(1) == 3 * d),
        [&] {
          return std::string(what) + ": features must be [n, " + std::to_string(3 * d) + "] (the target's three layers) "
                 "or [n, " + std::to_string(d) + "] (head states) for n = " + std::to_string(n) + ", got " +
                 shape_string(r.features.sizes().vec());
        });
  if (r.visible.defined())
    check(r.visible.dim() == 2 && r.visible.size(0) == n && r.visible.size(1) == T, [&] {
      return std::string(what) + ": visible must be [n, cache rows + n] = [" + std::to_string(n) + ", " +
             std::to_string(T) + "], got " + shape_string(r.visible.sizes().vec());
    });
  r.cache->check_room(n);
  const auto [tmin, tmax] = min_max_of(r.tokens);
  if (tmin < 0 || tmax >= config_.vocab_size)
    throw Error(std::string(what) + ": token id " + std::to_string(tmin < 0 ? tmin : tmax) +
                " outside the vocabulary [0, " + std::to_string(config_.vocab_size) + ")");
  const auto [pmin, pmax] = min_max_of(r.positions);
  if (pmin < 0 || pmax >= rope_.max_positions())
    throw Error(std::string(what) + ": position " + std::to_string(pmin < 0 ? pmin : pmax) + " outside [0, " +
                std::to_string(rope_.max_positions()) + ")");
}

std::vector<at::Tensor> Eagle3Head::forward_batch(const std::vector<Rows>& sequences) const {
  check(!sequences.empty(), "Eagle3Head::forward_batch: no sequences");
  std::vector<const KvCache*> caches;
  bool grad = false;
  for (const Rows& s : sequences) {
    check_rows(s, "Eagle3Head::forward");
    caches.push_back(s.cache);
    grad = grad || (at::GradMode::is_enabled() && (s.features.requires_grad() || weights_.fc.requires_grad()));
  }
  check_distinct_caches(caches, "Eagle3Head::forward_batch");
  ForwardClock::Scope forward_clock;
  if (native_ && !grad) return native_run(sequences);
  std::vector<at::Tensor> outs;
  for (const Rows& s : sequences) outs.push_back(reference_run(s));
  return outs;
}

at::Tensor Eagle3Head::reference_run(const Rows& r) const {
  const ComputeOptions& o = target_.options();
  const ModelConfig& c = config_;
  KvCache& cache = *r.cache;
  const int64_t n = r.tokens.size(0), start = cache.length(), d = c.hidden_size;
  at::Tensor mask;  // additive: 0 where visible, -inf elsewhere; undefined visible = causal
  if (r.visible.defined())
    mask = at::zeros({n, start + n}, o.tensor_options())
               .masked_fill_(r.visible.to(o.device, at::kBool).logical_not(), -std::numeric_limits<float>::infinity());
  else
    mask = attention_mask({}, start, n, o);
  const auto [cos, sin] = rope_.at_positions(r.positions.to(o.device));
  const auto features = r.features.to(o.device, o.dtype);
  const auto u = features.size(1) == d ? features  // fc on target features only
                                       : project(eagle3_fc_input(features, weights_, c.rms_norm_eps), weights_.fc);
  const auto e = at::embedding(target_.embedding(), r.tokens.to(o.device));
  const auto attention_in = at::cat({rms_norm(e, weights_.input_norm, c.rms_norm_eps),
                                     rms_norm(u, weights_.hidden_norm, c.rms_norm_eps)},
                                    -1);
  auto out = llama_decoder_layer(u, weights_.layer, c, cache, /*layer=*/0, start, cos, sin, mask,
                                 /*input_norm=*/false, nullptr, attention_in);
  cache.advance_to(start + n);
  return weights_.norm_output ? rms_norm(out, weights_.norm, c.rms_norm_eps) : out;
}

std::vector<at::Tensor> Eagle3Head::native_run(const std::vector<Rows>& sequences) const {
  std::lock_guard<std::mutex> lock(native_->mutex);
  const ModelConfig& c = config_;
  const int64_t d = c.hidden_size;
  int64_t n = 0, T_max = 0, visible_bytes = 0, fc_rows = 0;
  for (const Rows& s : sequences) {
    const int64_t rows = s.tokens.size(0), T = s.cache->length() + rows;
    n += rows;
    T_max = std::max(T_max, T);
    if (s.visible.defined()) visible_bytes += rows * T;
    if (s.features.size(1) != d) fc_rows += rows;
  }
  NativeWorkspace& ws = native_->ws;
  ws.reserve(c, n, T_max, visible_bytes);
  native_->fc_in.resize(static_cast<size_t>(fc_rows * 3 * d));
  native_->embedded.resize(static_cast<size_t>(n * d));
  native_->attention_in.resize(static_cast<size_t>(n * 2 * d));

  // u (the residual) into ws.h: states copied, target features gathered for one fc product (weights read once).
  ws.segments.clear();
  std::vector<int64_t> fc_dest;  // ws.h row of each fc input row
  int64_t row = 0;
  uint8_t* visible_at = ws.visible;
  for (const Rows& s : sequences) {
    const int64_t rows = s.tokens.size(0);
    const auto tokens = to_host(s.tokens, at::kLong);
    const auto positions = to_host(s.positions, at::kLong);
    const auto features = to_host(s.features, at::kFloat);
    if (features.size(1) == d) {
      std::memcpy(ws.h + row * d, features.data_ptr<float>(), static_cast<size_t>(rows * d) * sizeof(float));
    } else {
      std::memcpy(native_->fc_in.data() + fc_dest.size() * 3 * d, features.data_ptr<float>(),
                  static_cast<size_t>(rows * 3 * d) * sizeof(float));
      for (int64_t j = 0; j < rows; ++j) fc_dest.push_back(row + j);
    }
    target_.embedding_rows(tokens.data_ptr<int64_t>(), rows, native_->embedded.data() + row * d, d);
    append_head_segment(ws, rope_, s.cache, row, rows, positions.data_ptr<int64_t>(), s.visible, visible_at);
    row += rows;
  }
  if (fc_rows > 0) {  // (into ws.normed, free until the layer runs)
    float* in = native_->fc_in.data();
    for (size_t k = 0; k < native_->fc_norm.size(); ++k)  // EAGLE-3.1: each feature its own norm, in place
      rms_norm_rows(in + k * d, 3 * d, fc_rows, d, native_->fc_norm[k].data(), c.rms_norm_eps, in + k * d, 3 * d);
    float* fused = ws.normed;
    parallel_multiply(native_->fc, native_->fc_in.data(), 3 * d, fc_rows, fused, d);
    for (int64_t k = 0; k < fc_rows; ++k)
      std::memcpy(ws.h + fc_dest[k] * d, fused + k * d, static_cast<size_t>(d) * sizeof(float));
  }
  // The attention input: [input_layernorm(e) ; hidden_norm(u)] per row.
  float* attention_in = native_->attention_in.data();
  rms_norm_rows(native_->embedded.data(), d, n, d, native_->input_norm.data(), c.rms_norm_eps, attention_in, 2 * d);
  rms_norm_rows(ws.h, d, n, d, native_->hidden_norm.data(), c.rms_norm_eps, attention_in + d, 2 * d);
  native_decoder_layer(native_->layer, c, ws.segments, /*layer=*/0, ws, nullptr, attention_in);
  if (weights_.norm_output) rms_norm_rows(ws.h, d, n, d, native_->norm.data(), c.rms_norm_eps, ws.h, d);

  std::vector<at::Tensor> outs;
  for (const RowSegment& s : ws.segments) {
    s.cache->advance_to(s.start + s.n);
    auto out = at::empty({s.n, d}, at::TensorOptions().dtype(at::kFloat));
    std::memcpy(out.data_ptr<float>(), ws.h + s.row * d, static_cast<size_t>(s.n * d) * sizeof(float));
    outs.push_back(out);
  }
  return outs;
}

at::Tensor Eagle3Head::draft_logits(const at::Tensor& states) const {
  ForwardClock::Scope forward_clock;
  const int64_t d = config_.hidden_size;
  check(states.dim() == 2 && states.size(1) == d, [&] {
    return "Eagle3Head::logits: states must be [n, " + std::to_string(d) + "], got " +
           shape_string(states.sizes().vec());
  });
  // EAGLE-3.1's norm_output states are already normed: the LM head reads them as they are.
  if (native_ && !(at::GradMode::is_enabled() && states.requires_grad())) {
    const auto s = to_host(states, at::kFloat);
    const int64_t rows = s.size(0);
    std::vector<float> normed;
    const float* in = s.data_ptr<float>();
    if (!weights_.norm_output) {
      normed.resize(static_cast<size_t>(rows * d));
      rms_norm_rows(in, d, rows, d, native_->norm.data(), config_.rms_norm_eps, normed.data(), d);
      in = normed.data();
    }
    auto logits = at::empty({rows, native_->lm_head.out()}, at::TensorOptions().dtype(at::kFloat));
    parallel_multiply(native_->lm_head, in, d, rows, logits.data_ptr<float>(), native_->lm_head.out());
    return logits;
  }
  const auto o = target_.options();
  const auto x = states.to(o.device, o.dtype);
  return project(weights_.norm_output ? x : rms_norm(x, weights_.norm, config_.rms_norm_eps), weights_.lm_head)
      .to(at::kFloat);
}

at::Tensor Eagle3Head::logits(const at::Tensor& states) const {
  const auto reduced = draft_logits(states);
  if (!draft_ids_.defined()) return reduced;
  auto full = at::full({reduced.size(0), config_.vocab_size}, -std::numeric_limits<float>::infinity(), reduced.options());
  return full.index_copy_(1, draft_ids_device_.to(reduced.device()), reduced);
}

bool is_eagle3_config(const json& config) {
  if (config.contains("architectures") && config.at("architectures").is_array())
    for (const auto& a : config.at("architectures")) {
      if (a == "PEagleDraftModel") return false;  // P-EAGLE's (strategies/peagle) also has draft_vocab_size
      if (a.is_string() && a.get<std::string>().find("Eagle3") != std::string::npos) return true;
    }
  return config.contains(kLayersKey) || (config.contains("draft_vocab_size") && !config.contains("draftlab_eagle_input"));
}

}  // namespace draftlab
