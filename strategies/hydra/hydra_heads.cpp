#include "strategies/hydra/hydra_heads.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/safetensors.h"
#include "core/model/checkpoint_tensor.h"
#include "core/model/forward_clock.h"
#include "core/io/head_folder.h"

namespace draftlab {

namespace {

using nlohmann::json;

const char* const kPrefix = "hydra_head.";
const char* const kLmHeadKey = "draftlab_lm_head";  // "own" | "shared"

// The tensors of a config in file order, each with where it lives in HydraHeadWeights.
struct Slot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t head;
  int part;  // 0 input, 1 residual, 2 block, 3 lm_head
  int64_t block;
  bool bias;
};

std::vector<Slot> slots(const HydraConfig& c, int64_t d, int64_t V) {
  std::vector<Slot> s;
  for (int64_t k = 0; k < c.num_heads; ++k) {
    const std::string mlp = "hydra_mlp." + std::to_string(k) + ".";
    const int64_t in = (k + 2) * d;
    s.push_back({mlp + "0.linear.weight", {d, in}, k, 0, 0, false});
    s.push_back({mlp + "0.linear.bias", {d}, k, 0, 0, true});
    s.push_back({mlp + "0.res_connection.weight", {d, in}, k, 1, 0, false});
    s.push_back({mlp + "0.res_connection.bias", {d}, k, 1, 0, true});
    for (int64_t j = 1; j < c.num_layers; ++j) {
      s.push_back({mlp + std::to_string(j) + ".linear.weight", {d, d}, k, 2, j - 1, false});
      s.push_back({mlp + std::to_string(j) + ".linear.bias", {d}, k, 2, j - 1, true});
    }
    if (c.own_lm_head) {
      s.push_back({"hydra_lm_head." + std::to_string(k) + ".weight", {V, d}, k, 3, 0, false});
      s.push_back({"hydra_lm_head." + std::to_string(k) + ".bias", {V}, k, 3, 0, true});
    }
  }
  return s;
}

HydraHeadWeights::Linear& linear_of(HydraHeadWeights& w, const Slot& s) {
  HydraHeadWeights::Head& h = w.heads[static_cast<size_t>(s.head)];
  switch (s.part) {
    case 0: return h.input;
    case 1: return h.residual;
    case 2: return h.blocks[static_cast<size_t>(s.block)];
    default: return h.lm_head;
  }
}

HydraHeadWeights empty_weights(const HydraConfig& c) {
  HydraHeadWeights w;
  w.heads.resize(static_cast<size_t>(c.num_heads));
  for (auto& h : w.heads) h.blocks.resize(static_cast<size_t>(std::max<int64_t>(0, c.num_layers - 1)));
  return w;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

at::Tensor hydra_head_logits(const HydraHeadWeights& w, int64_t k, const at::Tensor& features,
                             const at::Tensor& embeddings, const at::Tensor& target_lm_head) {
  const HydraHeadWeights::Head& head = w.heads.at(static_cast<size_t>(k));
  const at::Tensor x = at::cat({features, embeddings}, -1);
  at::Tensor h = at::linear(x, head.residual.weight, head.residual.bias) +
                 at::silu(at::linear(x, head.input.weight, head.input.bias));
  for (const auto& b : head.blocks) h = h + at::silu(at::linear(h, b.weight, b.bias));
  if (head.lm_head.weight.defined()) return at::linear(h, head.lm_head.weight, head.lm_head.bias);
  return at::matmul(h, target_lm_head.t());
}

HydraHeads::HydraHeads(HydraConfig config, HydraHeadWeights weights, const LlamaModel& target)
    : config_(config), weights_(std::move(weights)), target_(target) {
  const int64_t K = config_.num_heads, L = config_.num_layers;
  const int64_t d = target.config().hidden_size, V = target.config().vocab_size;
  check(K >= 1 && L >= 1, "HydraHeads: expected num_heads >= 1 and num_layers >= 1, got " + std::to_string(K) + " and " +
                              std::to_string(L));
  check(static_cast<int64_t>(weights_.heads.size()) == K,
        "HydraHeads: expected " + std::to_string(K) + " heads, got " + std::to_string(weights_.heads.size()));
  for (const Slot& s : slots(config_, d, V)) {
    HydraHeadWeights::Head& h = weights_.heads[static_cast<size_t>(s.head)];
    check(s.part != 2 || static_cast<int64_t>(h.blocks.size()) == L - 1,
          "HydraHeads: head " + std::to_string(s.head) + ": expected " + std::to_string(L - 1) + " blocks after the first");
    const at::Tensor& t = s.bias ? linear_of(weights_, s).bias : linear_of(weights_, s).weight;
    check(t.defined() && t.sizes().vec() == s.shape,
          "HydraHeads: " + s.name + ": expected shape " + shape_string(s.shape) + " (from the config and the target's "
          "sizes), got " + (t.defined() ? shape_string(t.sizes().vec()) : std::string("nothing")));
  }
  for (const auto& h : weights_.heads)
    check(h.lm_head.weight.defined() == config_.own_lm_head,
          std::string("HydraHeads: expected ") + (config_.own_lm_head ? "own LM heads" : "no own LM heads (shared)"));
}

std::vector<std::pair<std::string, std::vector<int64_t>>> HydraHeads::checkpoint_tensors(const HydraConfig& config,
                                                                                        int64_t hidden, int64_t vocab) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const Slot& s : slots(config, hidden, vocab)) out.emplace_back(s.name, s.shape);
  return out;
}

std::unique_ptr<HydraHeads> HydraHeads::load(const std::string& path, const LlamaModel& target) {
  const HeadFolder folder =
      open_head_folder(path, "Hydra heads", {"model.safetensors", "hydra_lm_head.safetensors"}, "hydra_lm_head.pt");
  const json& j = folder.config;
  const int64_t d = target.config().hidden_size, V = target.config().vocab_size;
  HydraConfig c;
  c.num_heads = head_config_int(folder, "hydra_num_heads", 1, 0);
  c.num_layers = head_config_int(folder, "hydra_num_layers", 1, 1);
  check_head_sizes(folder, d, V);
  if (j.contains("hydra_head_arch") && j.at("hydra_head_arch") != "mlp")
    throw Error::in_file(folder.config_path, "hydra_head_arch", "\"mlp\" (prefix-mlp and cross-attn heads are not "
                         "implemented)", j.at("hydra_head_arch").dump());
  // Ungrounded heads read no candidate tokens and have their own layout (hydra_mlp without the token input): not
  // loadable by the Medusa loader either, so no advice to run them that way.
  if (j.contains("grounded_heads") && j.at("grounded_heads") != true)
    throw Error::in_file(folder.config_path, "grounded_heads",
                         "true (ungrounded Hydra heads are not supported; `draftlab train-head --kind hydra` trains "
                         "grounded ones)", j.at("grounded_heads").dump());
  // The official code reads the base model's hidden states `hidden_state_offset` layers before the last; draftlab's
  // heads read the final normed feature, so any other offset would silently read the wrong features.
  if (j.contains("hidden_state_offset") && j.at("hidden_state_offset") != 0)
    throw Error::in_file(folder.config_path, "hidden_state_offset",
                         "0 (heads that read an earlier layer's hidden state are not supported)",
                         j.at("hidden_state_offset").dump());

  SafetensorsFile file(folder.weights);
  std::string prefix;
  for (const TensorEntry& e : file.tensors())
    if (starts_with(e.name, kPrefix)) prefix = kPrefix;
  c.own_lm_head = file.find(prefix + "hydra_lm_head.0.weight") != nullptr;
  if (j.contains(kLmHeadKey) && !j.at(kLmHeadKey).is_null()) {
    const json& v = j.at(kLmHeadKey);
    if (v != "own" && v != "shared")
      throw Error::in_file(folder.config_path, kLmHeadKey, "\"own\" or \"shared\"", v.dump());
    if ((v == "own") != c.own_lm_head)
      throw Error::at(folder.weights, "tensor '" + prefix + "hydra_lm_head.0.weight' " +
                                          (c.own_lm_head ? "present" : "not found") + " but " + folder.config_path +
                                          " says \"" + kLmHeadKey + "\": " + v.dump());
  }

  const std::vector<Slot> want = slots(c, d, V);
  std::map<std::string, const Slot*> by_name;
  for (const Slot& s : want) by_name[prefix + s.name] = &s;
  const std::string layout = "hydra_num_heads " + std::to_string(c.num_heads) + ", hydra_num_layers " +
                             std::to_string(c.num_layers) + " in " + folder.config_path;
  for (const TensorEntry& e : file.tensors())
    if (!by_name.count(e.name))
      throw Error::at(folder.weights, "unexpected tensor '" + e.name + "' (" + layout + ": expected " + prefix +
                                          "hydra_mlp.{head}.{layer}... for head < " + std::to_string(c.num_heads) +
                                          ", layer < " + std::to_string(c.num_layers) + ", and " + prefix +
                                          "hydra_lm_head.{head}.weight/bias for own LM heads)");
  HydraHeadWeights w = empty_weights(c);
  const std::string note = " (from " + layout + " and the target's sizes)";
  for (const Slot& s : want) {
    const TensorEntry* e = file.find(prefix + s.name);
    if (!e)
      throw Error::at(folder.weights, "tensor '" + prefix + s.name + "' not found (expected shape " +
                                          shape_string(s.shape) + "; " + layout + ")");
    at::Tensor t = checkpoint_tensor(*e, s.shape, target.options(), note);
    (s.bias ? linear_of(w, s).bias : linear_of(w, s).weight) = std::move(t);
  }
  return std::make_unique<HydraHeads>(c, std::move(w), target);
}

std::unique_ptr<HydraHeads> HydraHeads::random(const LlamaModel& target, uint64_t seed, HydraConfig config,
                                               double weight_std) {
  const ComputeOptions& o = target.options();
  const int64_t d = target.config().hidden_size, V = target.config().vocab_size;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  auto uniform = [&](std::vector<int64_t> shape, double bound) { return (at::rand(shape, gen, f32) * 2.0 - 1.0) * bound; };
  auto normal = [&](std::vector<int64_t> shape) {
    return weight_std > 0 ? at::normal(0.0, weight_std, shape, gen, f32) : at::zeros(shape, f32);
  };
  HydraHeadWeights w = empty_weights(config);
  for (int64_t k = 0; k < config.num_heads; ++k) {
    HydraHeadWeights::Head& h = w.heads[static_cast<size_t>(k)];
    const int64_t in = (k + 2) * d;
    const double in_bound = 1.0 / std::sqrt(static_cast<double>(in));
    h.input = {normal({d, in}), uniform({d}, in_bound)};
    at::Tensor residual = uniform({d, in}, in_bound);
    residual.narrow(1, 0, d).copy_(at::eye(d, f32) + normal({d, d}));
    h.residual = {residual, uniform({d}, in_bound)};
    for (auto& b : h.blocks) b = {normal({d, d}), uniform({d}, 1.0 / std::sqrt(static_cast<double>(d)))};
    if (config.own_lm_head)
      h.lm_head = {target.lm_head().to(at::kCPU, at::kFloat).contiguous().clone(),
                   uniform({V}, weight_std / 0.02 / std::sqrt(static_cast<double>(d)))};
  }
  for (auto& h : w.heads)
    for (HydraHeadWeights::Linear* l : {&h.input, &h.residual, &h.lm_head}) {
      if (l->weight.defined()) *l = {l->weight.to(o.device, o.dtype), l->bias.to(o.device, o.dtype)};
    }
  for (auto& h : w.heads)
    for (auto& b : h.blocks) b = {b.weight.to(o.device, o.dtype), b.bias.to(o.device, o.dtype)};
  return std::make_unique<HydraHeads>(config, std::move(w), target);
}

void HydraHeads::save(const std::string& dir, at::ScalarType file_dtype) const {
  check(is_directory(dir), dir + ": not a directory");
  check(file_dtype == at::kFloat || file_dtype == at::kHalf || file_dtype == at::kBFloat16,
        "HydraHeads::save: file dtype must be float32, float16 or bfloat16");
  const std::string torch_dtype = file_dtype == at::kFloat ? "float32" : file_dtype == at::kHalf ? "float16" : "bfloat16";
  const DType st = file_dtype == at::kFloat ? DType::F32 : file_dtype == at::kHalf ? DType::F16 : DType::BF16;
  const int64_t d = target_.config().hidden_size, V = target_.config().vocab_size;
  HydraHeadWeights w = weights_;  // handles; linear_of needs a mutable one
  std::vector<at::Tensor> keep;   // the converted tensors outlive the write
  std::vector<TensorToWrite> entries;
  for (const Slot& s : slots(config_, d, V)) {
    const HydraHeadWeights::Linear& l = linear_of(w, s);
    keep.push_back((s.bias ? l.bias : l.weight).detach().to(at::kCPU, file_dtype).contiguous());
    const at::Tensor& t = keep.back();
    entries.push_back({s.name, st, t.sizes().vec(), t.data_ptr(), static_cast<size_t>(t.nbytes())});
  }
  write_safetensors(dir + "/model.safetensors", entries, {{"format", "pt"}});
  json j;
  j["hydra_num_heads"] = config_.num_heads;
  j["hydra_num_layers"] = config_.num_layers;
  j["hydra_head_arch"] = "mlp";
  j["grounded_heads"] = true;
  j["hidden_size"] = d;
  j["vocab_size"] = V;
  j[kLmHeadKey] = config_.own_lm_head ? "own" : "shared";
  j["torch_dtype"] = torch_dtype;
  write_file_atomically(dir + "/config.json", j.dump(2) + "\n");
}

int64_t HydraHeads::num_parameters() const {
  int64_t n = 0;
  for (const auto& s : checkpoint_tensors(config_, target_.config().hidden_size, target_.config().vocab_size)) {
    int64_t m = 1;
    for (int64_t x : s.second) m *= x;
    n += m;
  }
  return n;
}

at::Tensor HydraHeads::logits(const at::Tensor& feature, int64_t k, const std::vector<int64_t>& paths) const {
  ForwardClock::Scope forward_clock;
  const int64_t d = target_.config().hidden_size, V = target_.config().vocab_size;
  check(k >= 0 && k < config_.num_heads,
        "HydraHeads::logits: head " + std::to_string(k) + " of " + std::to_string(config_.num_heads));
  check(feature.numel() == d && (feature.dim() == 1 || (feature.dim() == 2 && feature.size(0) == 1)),
        "HydraHeads::logits: expected one feature row [" + std::to_string(d) + "], got " +
            shape_string(feature.sizes().vec()));
  const auto width = static_cast<size_t>(k + 1);
  check(!paths.empty() && paths.size() % width == 0,
        "HydraHeads::logits: head " + std::to_string(k) + " reads paths of " + std::to_string(k + 1) + " tokens, got " +
            std::to_string(paths.size()) + " ids");
  for (int64_t t : paths)
    check(t >= 0 && t < V, "HydraHeads::logits: token " + std::to_string(t) + " outside the vocabulary of " +
                               std::to_string(V));
  at::NoGradGuard no_grad;
  const ComputeOptions& o = target_.options();
  const auto rows = static_cast<int64_t>(paths.size() / width);
  const at::Tensor ids = at::tensor(paths, at::kLong).to(o.device);
  const at::Tensor embeddings = target_.embedding().index_select(0, ids).to(o.dtype).reshape({rows, (k + 1) * d});
  const at::Tensor f = feature.reshape({1, d}).to(o.device, o.dtype).expand({rows, d});
  return hydra_head_logits(weights_, k, f, embeddings, target_.lm_head()).to(at::kCPU, at::kFloat).contiguous();
}

}  // namespace draftlab
