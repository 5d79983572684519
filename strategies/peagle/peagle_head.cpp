#include "strategies/peagle/peagle_head.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/safetensors.h"
#include "core/model/checkpoint_tensor.h"
#include "core/io/head_folder.h"
#include "core/model/llama_layer.h"
#include "strategies/eagle3/draft_to_target.h"
#include "strategies/eagle3/eagle3_head.h"

namespace draftlab {

using json = nlohmann::json;

namespace {

const char* const kLayersKey = "draftlab_feature_layers";
const char* const kDepthsKey = "draftlab_num_depths";

at::ScalarType accumulate(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }


// Layer l's tensor names in SpecForge's layout, in PEagleLayerWeights' order (hidden_norm only in layer 0).
std::vector<std::string> layer_keys(int64_t l) {
  const std::string p = "layers." + std::to_string(l) + ".";
  std::vector<std::string> keys{p + "input_layernorm.weight"};
  if (l == 0) keys.push_back(p + "hidden_norm.weight");
  for (const char* k : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                        "self_attn.o_proj.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight",
                        "mlp.up_proj.weight", "mlp.down_proj.weight"})
    keys.push_back(p + k);
  return keys;
}
std::vector<at::Tensor*> layer_tensors(PEagleLayerWeights& L, int64_t l) {
  std::vector<at::Tensor*> t{&L.input_norm};
  if (l == 0) t.push_back(&L.hidden_norm);
  for (at::Tensor* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.mlp_norm, &L.w_gate, &L.w_up, &L.w_down}) t.push_back(w);
  return t;
}
std::vector<std::vector<int64_t>> layer_shapes(const ModelConfig& c, int64_t l) {
  const int64_t d = c.hidden_size, H = c.num_attention_heads, KVH = c.num_key_value_heads, hd = c.head_dim,
                I = c.intermediate_size, in = l == 0 ? 2 * d : d;
  std::vector<std::vector<int64_t>> s{{d}};
  if (l == 0) s.push_back({d});
  for (auto shape : std::vector<std::vector<int64_t>>{{H * hd, in}, {KVH * hd, in}, {KVH * hd, in}, {d, H * hd}, {d},
                                                      {I, d}, {I, d}, {d, I}})
    s.push_back(shape);
  return s;
}

std::string mask_token_problem(const json& j, const std::string& key, int64_t vocab) {
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab)
    return "an id in [0, " + std::to_string(vocab) + ")";
  return "";
}

}  // namespace

bool is_peagle_config(const json& j) {
  if (!j.contains("architectures") || !j.at("architectures").is_array()) return false;
  for (const auto& a : j.at("architectures"))
    if (a == "PEagleDraftModel") return true;
  return false;
}

at::Tensor peagle_rows(const PEagleConfig& c, const PEagleWeights& w, const RotaryEmbedding& rope,
                       const at::Tensor& embeddings, const at::Tensor& fused, const at::Tensor& positions,
                       const std::vector<at::Tensor>& past_keys, const std::vector<at::Tensor>& past_values,
                       const at::Tensor& mask, std::vector<at::Tensor>* new_keys, std::vector<at::Tensor>* new_values,
                       const LinearProjection& projection) {
  const auto project = [&](const at::Tensor& x, const at::Tensor& weight) {
    return projection ? projection(x, weight) : at::matmul(x, weight.t());
  };
  const ModelConfig& m = c.layers;
  const int64_t B = embeddings.size(0), Q = embeddings.size(1);
  const int64_t H = m.num_attention_heads, KVH = m.num_key_value_heads, hd = m.head_dim, G = H / KVH;
  const double eps = m.rms_norm_eps, scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const auto [cos, sin] = rope.at_positions(positions);
  const auto type = w.fc.scalar_type();
  at::Tensor h = project(fused.to(type), w.fc);  // u: layer 0's residual, raw
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const PEagleLayerWeights& L = w.layers[l];
    const auto x = l == 0 ? at::cat({rms_norm(embeddings.to(type), L.input_norm, eps), rms_norm(h, L.hidden_norm, eps)}, -1)
                          : rms_norm(h, L.input_norm, eps);
    const auto q = RotaryEmbedding::apply(project(x, L.wq).view({B, Q, H, hd}), cos, sin);
    const auto k = RotaryEmbedding::apply(project(x, L.wk).view({B, Q, KVH, hd}), cos, sin);
    const auto v = project(x, L.wv).view({B, Q, KVH, hd});
    if (new_keys) new_keys->push_back(k);
    if (new_values) new_values->push_back(v);
    auto keys = past_keys.empty() ? k : at::cat({past_keys[l], k}, 1);
    auto vals = past_values.empty() ? v : at::cat({past_values[l], v}, 1);
    if (G > 1) {  // query head h reads kv head h / G (LlamaModel's grouping)
      keys = keys.repeat_interleave(G, 2);
      vals = vals.repeat_interleave(G, 2);
    }
    auto scores = at::matmul((q * scale).permute({0, 2, 1, 3}), keys.permute({0, 2, 3, 1}));  // [B, H, Q, C + Q]
    if (mask.defined()) scores = scores + mask.to(scores.scalar_type());
    const auto probs = at::softmax(scores, -1, accumulate(scores)).to(q.scalar_type());
    const auto attn = at::matmul(probs, vals.permute({0, 2, 1, 3})).permute({0, 2, 1, 3}).reshape({B, Q, H * hd});
    h = h + project(attn, L.wo);
    const auto y = rms_norm(h, L.mlp_norm, eps);
    h = h + project(at::silu(project(y, L.w_gate)) * project(y, L.w_up), L.w_down);
  }
  return h;
}

ModelConfig PEagleHead::config_for(const ModelConfig& target, int64_t layers) {
  ModelConfig c = Eagle3Head::config_for(target);
  c.num_hidden_layers = layers;
  c.pard_token = -1;
  return c;
}

PEagleHead::PEagleHead(PEagleConfig config, PEagleWeights weights, at::Tensor draft_ids, const LlamaModel& target)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      target_(target),
      rope_([&] {
        ModelConfig c = config_.layers;  // the table must reach every position the target can, plus the slots
        c.max_position_embeddings = std::max(c.max_position_embeddings, target.config().max_position_embeddings) + 64;
        return c;
      }(), target.options()) {
  const ModelConfig& t = target.config();
  const int64_t V = t.vocab_size, Vd = weights_.lm_head.size(0);
  check(config_.layers.hidden_size == t.hidden_size && config_.layers.vocab_size == V,
        "PEagleHead: hidden_size / vocab_size differ from the target's");
  check(config_.mask_token >= 0 && config_.mask_token < V, "PEagleHead: mask token " +
                                                               std::to_string(config_.mask_token) + " outside [0, " +
                                                               std::to_string(V) + ")");
  check(config_.input_layers.size() == 3, "PEagleHead: expected three feature layers");
  for (int64_t l : config_.input_layers)
    check(l >= 1 && l <= t.num_hidden_layers, "PEagleHead: feature layer " + std::to_string(l) + " outside [1, " +
                                                  std::to_string(t.num_hidden_layers) + "]");
  if (draft_ids.defined()) {
    const std::string problem = draft_ids_problem(draft_ids, V);
    check(problem.empty(), "PEagleHead: draft vocabulary: " + problem);
    check(draft_ids.size(0) == Vd, "PEagleHead: " + std::to_string(draft_ids.size(0)) + " draft ids for an lm_head of " +
                                       std::to_string(Vd) + " rows");
    if (Vd < V) draft_ids_ = draft_ids.to(at::kCPU).contiguous().clone();
  } else {
    check(Vd == V, "PEagleHead: an lm_head of " + std::to_string(Vd) + " rows needs draft ids (d2t)");
  }
  projections_.add(weights_.fc);
  projections_.add(weights_.lm_head);
  for (const PEagleLayerWeights& L : weights_.layers)
    for (const at::Tensor* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) projections_.add(*w);
}

std::vector<int64_t> PEagleHead::target_feature_layers() const {
  std::vector<int64_t> after;
  for (int64_t l : config_.input_layers) after.push_back(l - 1);  // the input of layer l is the output of l - 1
  return after;
}

std::unique_ptr<PEagleHead> PEagleHead::random(const LlamaModel& target, uint64_t seed, int64_t layers,
                                               int64_t depths, int64_t mask_token) {
  const ModelConfig& t = target.config();
  check(layers >= 1, "PEagleHead::random: expected 1 or more layers");
  PEagleConfig c;
  c.layers = config_for(t, layers);
  c.mask_token = mask_token >= 0 ? mask_token : t.vocab_size - 1;
  c.depths = depths;
  c.input_layers = eagle3_input_layers(t.num_hidden_layers);
  const ComputeOptions& o = target.options();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto normal = [&](std::vector<int64_t> shape) {  // float32 on the CPU: a seed means the same head everywhere
    return at::normal(0.0, 0.02, shape, gen, at::TensorOptions().dtype(at::kFloat)).to(o.device, o.dtype);
  };
  auto ones = [&](int64_t n) { return at::ones({n}, o.tensor_options()); };
  const int64_t d = t.hidden_size;
  PEagleWeights w;
  w.fc = normal({d, 3 * d});
  w.mask_hidden = normal({3 * d});
  for (int64_t l = 0; l < layers; ++l) {
    PEagleLayerWeights L;
    const auto shapes = layer_shapes(c.layers, l);
    const auto tensors = layer_tensors(L, l);
    for (size_t i = 0; i < tensors.size(); ++i)
      *tensors[i] = shapes[i].size() == 1 ? ones(shapes[i][0]) : normal(shapes[i]);
    w.layers.push_back(std::move(L));
  }
  w.norm = ones(d);
  w.lm_head = normal({t.vocab_size, d});
  return std::make_unique<PEagleHead>(std::move(c), std::move(w), at::Tensor(), target);
}

std::unique_ptr<PEagleHead> PEagleHead::load(const std::string& path, const LlamaModel& target) {
  const HeadFolder folder = open_head_folder(path, "P-EAGLE draft", {"model.safetensors"}, "pytorch_model.bin");
  const json& j = folder.config;
  const std::string& cfg = folder.config_path;
  if (!is_peagle_config(j))
    throw Error::in_file(cfg, "architectures", "[\"PEagleDraftModel\"]",
                         j.contains("architectures") ? j.at("architectures").dump() : "absent");
  const ModelConfig& t = target.config();
  check_head_sizes(folder, t.hidden_size, t.vocab_size);
  PEagleConfig c;
  json shape = j;
  shape.erase("architectures");
  if (shape.contains("rope_scaling") && shape.at("rope_scaling").is_null()) shape.erase("rope_scaling");
  c.layers = parse_hf_config(shape, cfg);
  c.layers.num_local_experts = c.layers.num_experts_per_tok = 0;
  c.layers.pard_token = -1;
  // The mask id: draftlab writes mask_token_id and pard_token; vLLM reads pard_token or ptd_token_id.
  for (const char* key : {"mask_token_id", "pard_token", "ptd_token_id"}) {
    if (!j.contains(key) || j.at(key).is_null()) continue;
    const std::string problem = mask_token_problem(j, key, t.vocab_size);
    if (!problem.empty()) throw Error::in_file(cfg, key, problem, j.at(key).dump());
    c.mask_token = j.at(key).get<int64_t>();
    break;
  }
  if (c.mask_token < 0)
    throw Error::in_file(cfg, "mask_token_id", "the mask slots' token id (or pard_token / ptd_token_id)", "absent");
  c.depths = head_config_int(folder, kDepthsKey, 1, 4);
  c.input_layers = eagle3_input_layers(t.num_hidden_layers);
  if (j.contains(kLayersKey)) {
    const json& v = j.at(kLayersKey);
    bool ok = v.is_array() && v.size() == 3;
    for (size_t i = 0; ok && i < 3; ++i)
      ok = v[i].is_number_integer() && v[i].get<int64_t>() >= 1 && v[i].get<int64_t>() <= t.num_hidden_layers;
    if (!ok)
      throw Error::in_file(cfg, kLayersKey, "three target layer indices in [1, " + std::to_string(t.num_hidden_layers) +
                                                "]", v.dump());
    c.input_layers = {v[0].get<int64_t>(), v[1].get<int64_t>(), v[2].get<int64_t>()};
  }
  const int64_t V = t.vocab_size, Vd = head_config_int(folder, "draft_vocab_size", 1, V), d = t.hidden_size;
  if (Vd > V) throw Error::in_file(cfg, "draft_vocab_size", "at most vocab_size " + std::to_string(V), std::to_string(Vd));
  SafetensorsCollection file(folder.weights);
  const ComputeOptions& o = target.options();
  std::set<std::string> expected{"d2t", "t2d"};
  auto get = [&](const std::string& name, const std::vector<int64_t>& shape) {
    expected.insert(name);
    const TensorEntry* e = file.find(name);
    if (!e) throw Error::at(folder.weights, "tensor '" + name + "' not found (expected shape " + shape_string(shape) + ")");
    return checkpoint_tensor(*e, shape, o, " (from " + cfg + " and the target's hidden_size)");
  };
  PEagleWeights w;
  if (file.find("embed_tokens.weight")) w.embed = get("embed_tokens.weight", {V, d});
  w.fc = get("fc.weight", {d, 3 * d});
  w.mask_hidden = get("mask_hidden", {1, 1, 3 * d}).reshape({3 * d});
  for (int64_t l = 0; l < c.layers.num_hidden_layers; ++l) {
    PEagleLayerWeights L;
    const auto keys = layer_keys(l);
    const auto shapes = layer_shapes(c.layers, l);
    const auto tensors = layer_tensors(L, l);
    for (size_t i = 0; i < keys.size(); ++i) *tensors[i] = get(keys[i], shapes[i]);
    w.layers.push_back(std::move(L));
  }
  w.norm = get("norm.weight", {d});
  w.lm_head = get("lm_head.weight", {Vd, d});
  for (const std::string& name : file.names())
    if (!expected.count(name) && name.find("rotary_emb.inv_freq") == std::string::npos)
      throw Error::at(folder.weights, "unexpected tensor '" + name + "' (a P-EAGLE draft of " +
                                          std::to_string(c.layers.num_hidden_layers) + " layers)");
  const at::Tensor ids = read_draft_ids(file, Vd, V);
  check_target_to_draft(file, ids, V);
  return std::make_unique<PEagleHead>(std::move(c), std::move(w), ids, target);
}

void PEagleHead::save(const std::string& dir, at::ScalarType file_dtype) const {
  check(is_directory(dir), dir + ": not a directory");
  check(file_dtype == at::kFloat || file_dtype == at::kHalf || file_dtype == at::kBFloat16,
        "PEagleHead::save: file dtype must be float32, float16 or bfloat16");
  const std::string torch_dtype = file_dtype == at::kFloat ? "float32" : file_dtype == at::kHalf ? "float16" : "bfloat16";
  const DType st = file_dtype == at::kFloat ? DType::F32 : file_dtype == at::kHalf ? DType::F16 : DType::BF16;
  const int64_t V = config_.layers.vocab_size, Vd = weights_.lm_head.size(0), d = config_.layers.hidden_size;
  std::vector<at::Tensor> keep;
  std::vector<TensorToWrite> entries;
  auto add = [&](const std::string& name, const at::Tensor& t) {
    keep.push_back(t.detach().to(at::kCPU, file_dtype).contiguous());
    const at::Tensor& c = keep.back();
    entries.push_back({name, st, c.sizes().vec(), c.data_ptr(), static_cast<size_t>(c.nbytes())});
  };
  if (weights_.embed.defined()) add("embed_tokens.weight", weights_.embed);
  add("fc.weight", weights_.fc);
  add("mask_hidden", weights_.mask_hidden.reshape({1, 1, 3 * d}));
  for (size_t l = 0; l < weights_.layers.size(); ++l) {
    PEagleLayerWeights L = weights_.layers[l];
    const auto keys = layer_keys(static_cast<int64_t>(l));
    const auto tensors = layer_tensors(L, static_cast<int64_t>(l));
    for (size_t i = 0; i < keys.size(); ++i) add(keys[i], *tensors[i]);
  }
  add("norm.weight", weights_.norm);
  add("lm_head.weight", weights_.lm_head);
  const auto [d2t, t2d] = draft_to_target_tensors(draft_ids_, Vd, V);
  entries.push_back({"d2t", DType::I64, {Vd}, d2t.data_ptr(), static_cast<size_t>(d2t.nbytes())});
  entries.push_back({"t2d", DType::BOOL, {V}, t2d.data_ptr(), static_cast<size_t>(t2d.nbytes())});
  write_safetensors(dir + "/model.safetensors", entries, {{"format", "pt"}});

  json j = config_.layers.to_hf_json(torch_dtype);
  j["architectures"] = json::array({"PEagleDraftModel"});
  j["draft_vocab_size"] = Vd;
  j["norm_before_residual"] = false;
  j["mask_token_id"] = config_.mask_token;
  j["pard_token"] = config_.mask_token;
  j[kLayersKey] = config_.input_layers;
  j[kDepthsKey] = config_.depths;
  write_file_atomically(dir + "/config.json", j.dump(2) + "\n");
}

PEagleHead::Cache PEagleHead::make_cache(int64_t capacity) const {
  const ModelConfig& m = config_.layers;
  Cache c;
  for (size_t l = 0; l < weights_.layers.size(); ++l) {
    c.keys.push_back(at::zeros({1, capacity, m.num_key_value_heads, m.head_dim}, weights_.fc.options()));
    c.values.push_back(at::zeros({1, capacity, m.num_key_value_heads, m.head_dim}, weights_.fc.options()));
  }
  return c;
}

at::Tensor PEagleHead::draft(Cache& cache, const std::vector<int64_t>& tokens, const at::Tensor& features,
                             int64_t depth) const {
  at::NoGradGuard no_grad;
  const int64_t n = static_cast<int64_t>(tokens.size()), d = config_.layers.hidden_size;
  check(n >= 1 && depth >= 1, "P-EAGLE: a draft needs a root pair and depth >= 1");
  check(features.dim() == 2 && features.size(0) == n && features.size(1) == 3 * d,
        "P-EAGLE: features must be [pairs, 3 hidden_size] = [" + std::to_string(n) + ", " + std::to_string(3 * d) +
            "], got " + shape_string(features.sizes().vec()));
  const int64_t capacity = cache.keys.empty() ? 0 : cache.keys[0].size(1), C = cache.length;
  check(C + n <= capacity, "P-EAGLE: draft cache full (" + std::to_string(capacity) + " rows)");
  check(C + n + depth - 1 <= rope_.max_positions(), "P-EAGLE: slots past the position table");
  const auto device = weights_.fc.device();
  const int64_t Q = n + depth - 1;
  std::vector<int64_t> ids = tokens;
  ids.resize(static_cast<size_t>(Q), config_.mask_token);
  const at::Tensor& table = weights_.embed.defined() ? weights_.embed : target_.embedding();
  const auto embeddings = at::embedding(table, at::tensor(ids, at::kLong).to(device)).unsqueeze(0);
  const auto fused = at::cat({features.to(device, weights_.fc.scalar_type()),
                              weights_.mask_hidden.unsqueeze(0).expand({depth - 1, 3 * d})}, 0).unsqueeze(0);
  const auto positions = at::arange(C, C + Q, at::TensorOptions().dtype(at::kLong).device(device));
  std::vector<at::Tensor> past_keys, past_values, new_keys, new_values;
  for (size_t l = 0; l < cache.keys.size(); ++l) {
    past_keys.push_back(cache.keys[l].narrow(1, 0, C));
    past_values.push_back(cache.values[l].narrow(1, 0, C));
  }
  // Causal over the new rows (pairs, then the root's slots in order), everything cached visible.
  const auto mask = at::cat({at::zeros({Q, C}, at::kFloat),
                             at::full({Q, Q}, -std::numeric_limits<float>::infinity(), at::kFloat).triu(1)}, 1)
                        .to(device);
  const LinearProjection packed = projections_.bound();
  const auto out = peagle_rows(config_, weights_, rope_, embeddings, fused, positions, past_keys, past_values, mask,
                               &new_keys, &new_values, packed);
  for (size_t l = 0; l < new_keys.size(); ++l) {
    cache.keys[l].narrow(1, C, n).copy_(new_keys[l].narrow(1, 0, n));
    cache.values[l].narrow(1, C, n).copy_(new_values[l].narrow(1, 0, n));
  }
  cache.length = C + n;
  const auto rows = out[0].narrow(0, n - 1, depth);
  const auto reduced =
      projections_.apply(rms_norm(rows, weights_.norm, config_.layers.rms_norm_eps), weights_.lm_head).to(at::kFloat);
  if (!draft_ids_.defined()) return reduced;
  auto full = at::full({depth, config_.layers.vocab_size}, -std::numeric_limits<float>::infinity(), reduced.options());
  return full.index_copy_(1, draft_ids_.to(reduced.device()), reduced);
}

}  // namespace draftlab
