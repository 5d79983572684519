#include "core/training/feature_cache.h"

#include <H5Cpp.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/model/rope.h"
#include "core/model/training_forward.h"
#include "core/training/feature_cache_file.h"
#include "core/training/training_log.h"

namespace draftlab {

namespace {

// FNV-1a over 64-bit words (then the tail bytes): fast enough to hash a large model's weights in seconds.
class Hash64 {
 public:
  void update(const void* data, size_t bytes) {
    const auto* p = static_cast<const uint8_t*>(data);
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
      uint64_t word;
      std::memcpy(&word, p + i, 8);
      h_ = (h_ ^ word) * 1099511628211ULL;
    }
    for (; i < bytes; ++i) h_ = (h_ ^ p[i]) * 1099511628211ULL;
  }
  void update(const std::string& s) {
    const uint64_t n = s.size();
    update(&n, sizeof n);
    update(s.data(), s.size());
  }
  void update(const at::Tensor& t) {
    at::Tensor c = t.cpu();
    // Column-major projections are transposed views of contiguous storage: hash that storage, no copy.
    if (!c.is_contiguous() && c.dim() == 2 && c.t().is_contiguous()) c = c.t();
    c = c.contiguous();
    update(std::string(c.toString()));  // the dtype
    const int64_t rank = c.dim();
    update(&rank, sizeof rank);
    for (int64_t s : c.sizes()) update(&s, sizeof s);
    update(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
  }
  std::string hex() const {
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h_));
    return out;
  }

 private:
  uint64_t h_ = 1469598103934665603ULL;
};

void write_attribute(H5::H5Object& object, const std::string& key, const std::string& value) {
  H5::StrType type(H5::PredType::C_S1, value.empty() ? 1 : value.size());
  H5::Attribute a = object.createAttribute(key, type, H5::DataSpace(H5S_SCALAR));
  a.write(type, value.empty() ? std::string(1, '\0') : value);
}

}  // namespace

std::map<std::string, std::string> FeatureCacheIdentity::fields() const {
  std::map<std::string, std::string> f{{"model_checksum", model_checksum},
          {"tokenizer", tokenizer},
          {"data", data},
          {"context", std::to_string(context)},
          {"batch", std::to_string(batch)},
          {"seed", std::to_string(seed)},
          {"hidden_size", std::to_string(hidden_size)}};
  if (!feature_layers.empty()) {
    std::string layers;
    for (int64_t l : feature_layers) layers += (layers.empty() ? "" : ",") + std::to_string(l);
    f["feature_layers"] = layers;
  }
  return f;
}

std::string model_weights_checksum(const LlamaModel& target) {
  Hash64 h;
  h.update(target.config().to_hf_json().dump());
  const LlamaWeights& w = target.weights();
  h.update(w.embed);
  for (const LlamaLayerWeights& l : w.layers) {
    for (const at::Tensor* t : {&l.attn_norm, &l.wqkv, &l.wo, &l.mlp_norm, &l.w_gate_up, &l.w_down, &l.router})
      if (t->defined()) h.update(*t);
    for (size_t e = 0; e < l.expert_gate_up.size(); ++e) {
      h.update(l.expert_gate_up[e]);
      h.update(l.expert_down[e]);
    }
  }
  h.update(w.norm);
  h.update(w.lm_head);
  return h.hex();
}

std::string tokenizer_checksum(const Tokenizer& tokenizer) {
  Hash64 h;
  const int64_t ids[3] = {tokenizer.vocab_size(), tokenizer.bos_id(), tokenizer.eos_id()};
  h.update(ids, sizeof ids);
  for (int32_t i = 0; i < tokenizer.vocab_size(); ++i) h.update(tokenizer.piece(i));
  return h.hex();
}

void FeatureCache::build(const std::string& path, const LlamaModel& target, const TextDataset& data,
                         const FeatureCacheIdentity& identity, int64_t steps, at::ScalarType feature_dtype,
                         const std::function<void(int64_t, int64_t)>& progress, DataParallel* parallel) {
  check(steps > 0, "--cache-steps: expected a positive number, got " + std::to_string(steps));
  check(feature_dtype == at::kFloat || feature_dtype == at::kHalf,
        "--feature-cache-dtype: expected float32 or float16");
  check(identity.hidden_size == target.config().hidden_size, "FeatureCache::build: identity.hidden_size differs "
                                                             "from the target's");
  const int64_t B = identity.batch, span = identity.context + 1, d = identity.width();
  const hsize_t N = static_cast<hsize_t>(steps * B);
  const RotaryEmbedding rope(target.config(), target.options());
  // The rows of step s and the target's features of them: the very windows (and tensor shapes) that on-the-fly
  // training gives the target at step s.
  auto rows_of_step = [&](int64_t s) { return data.train_rows(B, identity.context, identity.seed, s); };
  auto features_of = [&](const RowBatch& r) {
    at::NoGradGuard no_grad;
    return training_layer_features(target.config(), target.weights(), rope, r.tokens.to(target.options().device),
                                   identity.feature_layers)
        .to(at::kCPU, feature_dtype)
        .contiguous();
  };
  // Calls write(s, rows, features) for every step in order, on rank 0 alone; the ranks take turns computing steps
  // (rank 0 draws the others' rows again: only their features travel).
  using Write = std::function<void(int64_t, const RowBatch&, const at::Tensor&)>;
  auto for_each_step = [&](const Write& write) {
    const int64_t world = parallel ? parallel->world_size() : 1, rank = parallel ? parallel->rank() : 0;
    for (int64_t first = 0; first < steps; first += world) {
      const int64_t mine = first + rank;
      const RowBatch own = mine < steps ? rows_of_step(mine) : RowBatch{};
      const at::Tensor f =
          mine < steps ? features_of(own) : at::zeros({B, span, d}, at::TensorOptions().dtype(feature_dtype));
      const std::vector<at::Tensor> all = parallel ? parallel->gather_to_main(f) : std::vector<at::Tensor>{f};
      for (int64_t r = 0; r < static_cast<int64_t>(all.size()) && first + r < steps; ++r) {
        write(first + r, r == rank ? own : rows_of_step(first + r), all[static_cast<size_t>(r)]);
        if (progress) progress(first + r + 1, steps);
      }
    }
  };
  if (parallel && !parallel->is_main()) return for_each_step([](int64_t, const RowBatch&, const at::Tensor&) {});
  write_through_temporary(path, [&](const std::string& tmp) {
    try {
      H5::Exception::dontPrint();
      H5::H5File file(tmp, H5F_ACC_TRUNC);
      const hsize_t wdims[2] = {N, static_cast<hsize_t>(span)};
      const hsize_t fdims[3] = {N, static_cast<hsize_t>(span), static_cast<hsize_t>(d)};
      H5::DataSpace wspace(2, wdims), fspace(3, fdims);
      H5::DataSet windows = file.createDataSet("windows", H5::PredType::STD_I64LE, wspace);
      H5::DataSet mask;
      if (data.has_loss_mask()) mask = file.createDataSet("loss_mask", H5::PredType::STD_U8LE, wspace);
      const bool whole = data.sampling() == Sampling::Whole;
      const hsize_t ldims[1] = {N};
      H5::DataSpace lspace(1, ldims);
      H5::DataSet lengths;
      if (whole) lengths = file.createDataSet("lengths", H5::PredType::STD_I64LE, lspace);
      const H5::FloatType f16 = feature_cache_float16_type();
      const H5::DataType& ftype =
          feature_dtype == at::kHalf ? static_cast<const H5::DataType&>(f16) : H5::PredType::IEEE_F32LE;
      H5::DataSet features = file.createDataSet("features", ftype, fspace);
      const H5::DataType& fmem =
          feature_dtype == at::kHalf ? static_cast<const H5::DataType&>(f16) : H5::PredType::NATIVE_FLOAT;
      for_each_step([&](int64_t s, const RowBatch& r, const at::Tensor& f) {
        const at::Tensor& w = r.tokens;
        H5::DataSpace ws = windows.getSpace();
        windows.write(w.data_ptr<int64_t>(), H5::PredType::NATIVE_INT64, select_cache_rows(ws, 2, s * B, B), ws);
        if (r.mask.defined()) {
          const at::Tensor m = r.mask.to(at::kByte).contiguous();
          H5::DataSpace ms = mask.getSpace();
          mask.write(m.data_ptr<uint8_t>(), H5::PredType::NATIVE_UINT8, select_cache_rows(ms, 2, s * B, B), ms);
        }
        if (whole) {
          const at::Tensor l = r.lengths.contiguous();
          H5::DataSpace ls = lengths.getSpace();
          lengths.write(l.data_ptr<int64_t>(), H5::PredType::NATIVE_INT64, select_cache_rows(ls, 1, s * B, B), ls);
        }
        H5::DataSpace fs = features.getSpace();
        features.write(f.data_ptr(), fmem, select_cache_rows(fs, 3, s * B, B), fs);
      });
      H5::Group root = file.openGroup("/");
      std::map<std::string, std::string> attrs = identity.fields();
      attrs["format"] = kFeatureCacheFormat;
      attrs["model_path"] = identity.model_path;
      attrs["data_source"] = identity.data_source;
      attrs["steps"] = std::to_string(steps);
      attrs["feature_dtype"] = feature_dtype == at::kHalf ? "float16" : "float32";
      attrs["date"] = utc_timestamp();
      for (const auto& [k, v] : attrs) write_attribute(root, k, v);
    } catch (const H5::Exception& e) {
      throw Error::at(path, "cannot write the feature cache (" + e.getDetailMsg() + ")");
    }
  });
}

std::unique_ptr<FeatureCache> FeatureCache::open(const std::string& path, const LlamaModel& target,
                                                 const FeatureCacheIdentity& expected) {
  std::unique_ptr<FeatureCache> c(new FeatureCache());
  c->file_ = std::make_unique<FeatureCacheFile>(path);
  FeatureCacheFile& file = *c->file_;
  file.check_format();
  const auto& a = file.attributes();
  for (const auto& [key, value] : expected.fields()) {
    auto it = a.find(key);
    if (it != a.end() && it->second == value) continue;
    std::string ours = "'" + value + "' (this run", theirs = it == a.end() ? "none" : "'" + it->second + "' (the cache";
    if (key == "model_checksum") {
      ours += ": target " + expected.model_path;
      theirs += it == a.end() ? "" : ": built from " + file.attribute("model_path");
    } else if (key == "data") {
      ours += ": " + expected.data_source;
      theirs += it == a.end() ? "" : ": built from " + file.attribute("data_source");
    }
    throw Error::in_file(path, key, ours + ")", theirs + (it == a.end() ? "" : ")") +
                                                   "; delete the file or pass another --feature-cache to rebuild");
  }
  c->batch_ = expected.batch;
  c->span_ = expected.context + 1;
  c->hidden_ = expected.width();
  file.check_layout(c->batch_, c->span_, c->hidden_);
  c->steps_ = file.steps();
  c->seed_ = expected.seed;
  c->vocab_ = target.config().vocab_size;
  c->compute_dtype_ = target.options().dtype;
  c->device_ = target.options().device;
  c->feature_dtype_ = file.float16_features() ? at::kHalf : at::kFloat;
  return c;
}

std::unique_ptr<FeatureCache> FeatureCache::open_or_build(const FeatureCacheOptions& options, const LlamaModel& target,
                                                          const TextDataset& data, int64_t batch, int64_t context,
                                                          uint64_t seed, int64_t run_steps,
                                                          const std::vector<int64_t>& feature_layers,
                                                          DataParallel* parallel) {
  FeatureCacheIdentity id;
  id.model_checksum = model_weights_checksum(target);
  id.model_path = options.model_path;
  id.tokenizer = options.tokenizer;
  id.data = data.fingerprint();
  id.data_source = options.data_source;
  id.context = context;
  id.batch = batch;
  id.seed = seed;
  id.hidden_size = target.config().hidden_size;
  id.feature_layers = feature_layers;
  bool absent = !is_file(options.path);
  // Rank 0 decides: a rank that looked after rank 0 had written the file would skip the build the others run.
  if (parallel) absent = parallel->sum(parallel->is_main() && absent ? 1.0 : 0.0) > 0;
  if (absent) {
    const int64_t steps = options.steps > 0 ? options.steps : run_steps;
    const auto start = std::chrono::steady_clock::now();
    auto progress = [&](int64_t done, int64_t total) {
      if (options.quiet || (parallel && !parallel->is_main())) return;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const bool terminal = ::isatty(STDERR_FILENO);
      if (!terminal && done % 50 != 0 && done != total) return;
      std::fprintf(stderr, "%sfeature cache %s: step %ld/%ld  %.0f windows/s  ETA %.0f s%s", terminal ? "\r" : "",
                   options.path.c_str(), static_cast<long>(done), static_cast<long>(total),
                   s > 0 ? static_cast<double>(done * batch) / s : 0.0,
                   s / static_cast<double>(done) * static_cast<double>(total - done),
                   terminal && done != total ? "   " : "\n");
      std::fflush(stderr);
    };
    build(options.path, target, data, id, steps, options.dtype, progress, parallel);
    // The others open the file once rank 0 has renamed it into place; if rank 0 failed, it has ended, and so
    // does this wait (with an error naming the barrier).
    if (parallel) parallel->barrier();
  }
  return open(options.path, target, id);
}

FeatureCache::~FeatureCache() = default;

bool FeatureCache::has_mask() const { return file_->has_mask(); }
const std::map<std::string, std::string>& FeatureCache::attributes() const { return file_->attributes(); }

CachedBatch FeatureCache::batch(int64_t step) const { return read_rows(rows_of_step(step), {0, batch_}); }

CachedBatch FeatureCache::batch(int64_t step, BatchRows rows) const {
  return read_rows(rows_of_step(step), rows);
}

std::vector<int64_t> FeatureCache::rows_of_step(int64_t step) const {
  std::vector<int64_t> rows(static_cast<size_t>(batch_));
  if (step < steps_) {
    for (int64_t b = 0; b < batch_; ++b) rows[b] = step * batch_ + b;
  } else {
    // A generator per step, salted so it is not train_batch's: rows depend on (seed, step) only.
    std::seed_seq seq{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32), static_cast<uint32_t>(step),
                      static_cast<uint32_t>(static_cast<uint64_t>(step) >> 32), 0x5eedcac3u};
    std::mt19937_64 gen(seq);
    for (int64_t b = 0; b < batch_; ++b) rows[b] = static_cast<int64_t>(gen() % static_cast<uint64_t>(windows()));
  }
  return rows;
}

CachedBatch FeatureCache::read_rows(const std::vector<int64_t>& rows, BatchRows features_of) const {
  const int64_t B = static_cast<int64_t>(rows.size());
  auto windows = at::empty({B, span_}, at::TensorOptions().dtype(at::kLong));
  auto mask = at::empty({B, span_}, at::TensorOptions().dtype(at::kByte));
  auto lengths = at::empty({B}, at::TensorOptions().dtype(at::kLong));
  auto features = at::empty({features_of.count, span_, hidden_}, at::TensorOptions().dtype(feature_dtype_));
  file_->read_rows(rows, vocab_, windows.data_ptr<int64_t>(), mask.data_ptr<uint8_t>(), lengths.data_ptr<int64_t>());
  file_->read_features(rows, features_of.first, features_of.count, features.data_ptr());
  CachedBatch out;
  out.windows = windows;
  if (file_->has_mask()) out.mask = mask.to(at::kFloat);
  if (file_->has_lengths()) out.lengths = lengths;
  out.features = features.to(device_, compute_dtype_);
  return out;
}

}  // namespace draftlab
