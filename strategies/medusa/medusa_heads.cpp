#include "strategies/medusa/medusa_heads.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/safetensors.h"
#include "core/model/checkpoint_tensor.h"
#include "core/model/forward_clock.h"
#include "core/io/head_folder.h"
#include "core/model/native_decoder.h"

namespace draftlab {

namespace {

using nlohmann::json;

const char* const kPrefix = "medusa_head.";
const char* const kLmHeadKey = "draftlab_lm_head";  // "own" | "shared"

std::string block_key(int64_t k, int64_t j, const char* what) {
  return std::to_string(k) + "." + std::to_string(j) + ".linear." + what;
}
std::string lm_head_key(int64_t k, int64_t layers) { return std::to_string(k) + "." + std::to_string(layers) + ".weight"; }

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace

at::Tensor medusa_head_hidden(const MedusaHeadWeights& w, int64_t k, const at::Tensor& features) {
  at::Tensor h = features;
  for (const auto& block : w.blocks.at(static_cast<size_t>(k))) h = h + at::silu(at::linear(h, block.weight, block.bias));
  return h;
}

at::Tensor medusa_head_logits(const MedusaHeadWeights& w, int64_t k, const at::Tensor& features,
                              const at::Tensor& target_lm_head) {
  const at::Tensor& lm_head = w.lm_heads.empty() ? target_lm_head : w.lm_heads.at(static_cast<size_t>(k));
  return at::matmul(medusa_head_hidden(w, k, features), lm_head.t());
}

MedusaHeads::MedusaHeads(MedusaConfig config, MedusaHeadWeights weights, const LlamaModel& target, WeightStorage stored)
    : config_(config), weights_(std::move(weights)), target_(target) {
  const int64_t K = config_.num_heads, L = config_.num_layers;
  const int64_t d = target.config().hidden_size, V = target.config().vocab_size;
  check(K >= 1 && L >= 0, "MedusaHeads: expected num_heads >= 1 and num_layers >= 0, got " + std::to_string(K) + " and " +
                              std::to_string(L));
  check(static_cast<int64_t>(weights_.blocks.size()) == K,
        "MedusaHeads: expected blocks for " + std::to_string(K) + " heads, got " + std::to_string(weights_.blocks.size()));
  for (int64_t k = 0; k < K; ++k) {
    const auto& blocks = weights_.blocks[static_cast<size_t>(k)];
    check(static_cast<int64_t>(blocks.size()) == L, "MedusaHeads: head " + std::to_string(k) + ": expected " +
                                                        std::to_string(L) + " blocks, got " + std::to_string(blocks.size()));
    for (const auto& b : blocks)
      check(b.weight.sizes().vec() == std::vector<int64_t>{d, d} && b.bias.sizes().vec() == std::vector<int64_t>{d},
            "MedusaHeads: head " + std::to_string(k) + ": expected blocks of weight [" + std::to_string(d) + ", " +
                std::to_string(d) + "] and bias [" + std::to_string(d) + "] (the target's hidden size), got " +
                shape_string(b.weight.sizes().vec()) + " and " + shape_string(b.bias.sizes().vec()));
  }
  check(static_cast<int64_t>(weights_.lm_heads.size()) == (config_.own_lm_head ? K : 0),
        "MedusaHeads: expected " + std::string(config_.own_lm_head ? std::to_string(K) + " own LM heads" : "no own LM heads (shared)") +
            ", got " + std::to_string(weights_.lm_heads.size()));
  for (const auto& lm : weights_.lm_heads)
    check(lm.sizes().vec() == std::vector<int64_t>{V, d},
          "MedusaHeads: expected LM heads [" + std::to_string(V) + ", " + std::to_string(d) + "] (the target's), got " +
              shape_string(lm.sizes().vec()));

  if (target.native() == nullptr) return;
  const WeightStorage storage = target.options().weights.value_or(stored);
  native_ = std::make_unique<Native>();
  for (const auto& blocks : weights_.blocks) {
    native_->w.emplace_back();
    native_->b.emplace_back();
    for (const auto& b : blocks) {
      native_->w.back().push_back(pack_matrix(b.weight, storage, target.options().block_dot));
      native_->b.back().push_back(float_vector(b.bias));
    }
  }
  for (const auto& lm : weights_.lm_heads) native_->lm_heads.push_back(pack_matrix(lm, storage, target.options().block_dot));
  native_->h.resize(static_cast<size_t>(K * d));
  native_->y.resize(static_cast<size_t>(d));
}

MedusaHeads::~MedusaHeads() = default;

std::vector<std::string> MedusaHeads::checkpoint_keys(const MedusaConfig& c) {
  std::vector<std::string> keys;
  for (int64_t k = 0; k < c.num_heads; ++k) {
    for (int64_t j = 0; j < c.num_layers; ++j) {
      keys.push_back(kPrefix + block_key(k, j, "weight"));
      keys.push_back(kPrefix + block_key(k, j, "bias"));
    }
    if (c.own_lm_head) keys.push_back(kPrefix + lm_head_key(k, c.num_layers));
  }
  return keys;
}

std::unique_ptr<MedusaHeads> MedusaHeads::load(const std::string& path, const LlamaModel& target) {
  const HeadFolder folder =
      open_head_folder(path, "Medusa heads", {"model.safetensors", "medusa_lm_head.safetensors"}, "medusa_lm_head.pt");
  const std::string& weights_path = folder.weights;
  const std::string& config_path = folder.config_path;
  const json& j = folder.config;
  const int64_t d = target.config().hidden_size, V = target.config().vocab_size;
  MedusaConfig c;
  c.num_heads = head_config_int(folder, "medusa_num_heads", 1, 0);
  c.num_layers = head_config_int(folder, "medusa_num_layers", 0, 1);
  check_head_sizes(folder, d, V);

  SafetensorsFile file(weights_path);
  // Prefixed (v1.0 names, what save() writes) or bare state-dict keys (v0.1's medusa_lm_head.pt), one or the other.
  std::string prefix;
  for (const TensorEntry& e : file.tensors())
    if (starts_with(e.name, kPrefix)) prefix = kPrefix;
  c.own_lm_head = file.find(prefix + lm_head_key(0, c.num_layers)) != nullptr;
  if (j.contains(kLmHeadKey) && !j.at(kLmHeadKey).is_null()) {
    const json& v = j.at(kLmHeadKey);
    if (v != "own" && v != "shared") throw Error::in_file(config_path, kLmHeadKey, "\"own\" or \"shared\"", v.dump());
    if ((v == "own") != c.own_lm_head)
      throw Error::at(weights_path, "tensor '" + prefix + lm_head_key(0, c.num_layers) + "' " +
                                        (c.own_lm_head ? "present" : "not found") + " but " + config_path + " says \"" +
                                        kLmHeadKey + "\": " + v.dump());
  }

  const auto keys = checkpoint_keys(c);
  std::set<std::string> expected;
  for (const auto& key : keys) expected.insert(prefix + key.substr(std::strlen(kPrefix)));
  const std::string layout = "medusa_num_heads " + std::to_string(c.num_heads) + ", medusa_num_layers " +
                             std::to_string(c.num_layers) + " in " + config_path;
  for (const TensorEntry& e : file.tensors()) {
    if (expected.count(e.name)) continue;
    std::string why = "unexpected tensor '" + e.name + "' (" + layout + ": expected " + prefix + "{head}.{layer}.linear."
                      "weight/bias for head < " + std::to_string(c.num_heads) + ", layer < " +
                      std::to_string(c.num_layers) + ", and " + prefix + "{head}." + std::to_string(c.num_layers) +
                      ".weight for own LM heads)";
    if (!prefix.empty() && !starts_with(e.name, prefix)) why += "; the file mixes prefixed and bare names";
    throw Error::at(weights_path, why);
  }

  const ComputeOptions& o = target.options();
  const std::string note = " (from " + layout + " and the target's sizes)";
  auto get = [&](const std::string& name, const std::vector<int64_t>& shape) {
    const TensorEntry* e = file.find(prefix + name);
    if (!e)
      throw Error::at(weights_path, "tensor '" + prefix + name + "' not found (expected shape " + shape_string(shape) +
                                        "; " + layout + ")");
    return checkpoint_tensor(*e, shape, o, note);
  };
  MedusaHeadWeights w;
  for (int64_t k = 0; k < c.num_heads; ++k) {
    w.blocks.emplace_back();
    for (int64_t l = 0; l < c.num_layers; ++l)
      w.blocks.back().push_back({get(block_key(k, l, "weight"), {d, d}), get(block_key(k, l, "bias"), {d})});
    if (c.own_lm_head) w.lm_heads.push_back(get(lm_head_key(k, c.num_layers), {V, d}));
  }
  const TensorEntry* first = c.num_layers > 0 ? file.find(prefix + block_key(0, 0, "weight"))
                                              : file.find(prefix + lm_head_key(0, c.num_layers));
  return std::make_unique<MedusaHeads>(c, std::move(w), target, checkpoint_storage(first));
}

std::unique_ptr<MedusaHeads> MedusaHeads::random(const LlamaModel& target, uint64_t seed, MedusaConfig config,
                                                 double weight_std) {
  const ComputeOptions& o = target.options();
  const int64_t d = target.config().hidden_size;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  const double bound = 1.0 / std::sqrt(static_cast<double>(d));  // nn.Linear's bias init
  MedusaHeadWeights w;
  for (int64_t k = 0; k < config.num_heads; ++k) {
    w.blocks.emplace_back();
    for (int64_t l = 0; l < config.num_layers; ++l) {
      at::Tensor weight = weight_std > 0 ? at::normal(0.0, weight_std, {d, d}, gen, f32) : at::zeros({d, d}, f32);
      at::Tensor bias = (at::rand({d}, gen, f32) * 2.0 - 1.0) * bound;
      w.blocks.back().push_back({weight.to(o.device, o.dtype), bias.to(o.device, o.dtype)});
    }
    if (config.own_lm_head) w.lm_heads.push_back(target.lm_head().to(o.device, o.dtype).contiguous().clone());
  }
  return std::make_unique<MedusaHeads>(config, std::move(w), target);
}

void MedusaHeads::save(const std::string& dir, at::ScalarType file_dtype) const {
  check(is_directory(dir), dir + ": not a directory");
  check(file_dtype == at::kFloat || file_dtype == at::kHalf || file_dtype == at::kBFloat16,
        "MedusaHeads::save: file dtype must be float32, float16 or bfloat16");
  const std::string torch_dtype = file_dtype == at::kFloat ? "float32" : file_dtype == at::kHalf ? "float16" : "bfloat16";
  const DType st = file_dtype == at::kFloat ? DType::F32 : file_dtype == at::kHalf ? DType::F16 : DType::BF16;
  std::vector<at::Tensor> keep;  // the converted tensors outlive the write
  std::vector<TensorToWrite> entries;
  const auto keys = checkpoint_keys(config_);
  size_t next = 0;
  auto add = [&](const at::Tensor& t) {
    keep.push_back(t.detach().to(at::kCPU, file_dtype).contiguous());
    const at::Tensor& c = keep.back();
    entries.push_back({keys.at(next++), st, c.sizes().vec(), c.data_ptr(), static_cast<size_t>(c.nbytes())});
  };
  for (int64_t k = 0; k < config_.num_heads; ++k) {  // checkpoint_keys' order
    for (const auto& b : weights_.blocks[static_cast<size_t>(k)]) {
      add(b.weight);
      add(b.bias);
    }
    if (config_.own_lm_head) add(weights_.lm_heads[static_cast<size_t>(k)]);
  }
  write_safetensors(dir + "/model.safetensors", entries, {{"format", "pt"}});
  json j;
  j["medusa_num_heads"] = config_.num_heads;
  j["medusa_num_layers"] = config_.num_layers;
  j["hidden_size"] = target_.config().hidden_size;
  j["vocab_size"] = target_.config().vocab_size;
  j[kLmHeadKey] = config_.own_lm_head ? "own" : "shared";
  j["torch_dtype"] = torch_dtype;
  write_file_atomically(dir + "/config.json", j.dump(2) + "\n");
}

int64_t MedusaHeads::num_parameters() const {
  int64_t n = 0;
  for (const auto& blocks : weights_.blocks)
    for (const auto& b : blocks) n += b.weight.numel() + b.bias.numel();
  for (const auto& lm : weights_.lm_heads) n += lm.numel();
  return n;
}

at::Tensor MedusaHeads::logits(const at::Tensor& feature, int64_t heads) const {
  ForwardClock::Scope forward_clock;
  const int64_t d = target_.config().hidden_size;
  if (heads < 0) heads = config_.num_heads;
  check(heads >= 1 && heads <= config_.num_heads, "MedusaHeads::logits: expected 1.." + std::to_string(config_.num_heads) +
                                                      " heads, got " + std::to_string(heads));
  check(feature.numel() == d && (feature.dim() == 1 || (feature.dim() == 2 && feature.size(0) == 1)),
        "MedusaHeads::logits: expected one feature row [" + std::to_string(d) + "], got " +
            shape_string(feature.sizes().vec()));
  if (native_) return native_logits(feature, heads);
  at::NoGradGuard no_grad;
  const ComputeOptions& o = target_.options();
  const at::Tensor f = feature.reshape({1, d}).to(o.device, o.dtype);
  std::vector<at::Tensor> rows;
  for (int64_t k = 0; k < heads; ++k) rows.push_back(medusa_head_logits(weights_, k, f, target_.lm_head()));
  return at::cat(rows, 0).to(at::kFloat);
}

at::Tensor MedusaHeads::native_logits(const at::Tensor& feature, int64_t heads) const {
  const int64_t d = target_.config().hidden_size, V = target_.config().vocab_size;
  const at::Tensor f = feature.reshape({d}).to(at::kCPU, at::kFloat).contiguous();
  std::lock_guard<std::mutex> lock(native_->mutex);
  float* y = native_->y.data();
  for (int64_t k = 0; k < heads; ++k) {
    float* h = native_->h.data() + k * d;
    std::memcpy(h, f.data_ptr<float>(), static_cast<size_t>(d) * sizeof(float));
    for (int64_t l = 0; l < config_.num_layers; ++l) {
      parallel_multiply(native_->w[k][l], h, d, 1, y, d);
      const float* b = native_->b[k][l].data();
      for (int64_t i = 0; i < d; ++i) h[i] += silu(y[i] + b[i]);
    }
  }
  if (native_->lm_heads.empty())  // the target's LM head: one pass over its weights for every head's row
    return target_.native()->lm_head_logits(native_->h.data(), d, heads);
  auto out = at::empty({heads, V}, at::TensorOptions().dtype(at::kFloat));
  for (int64_t k = 0; k < heads; ++k)
    parallel_multiply(native_->lm_heads[k], native_->h.data() + k * d, d, 1, out.data_ptr<float>() + k * V, V);
  return out;
}

}  // namespace draftlab
