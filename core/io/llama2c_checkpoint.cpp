#include "core/io/llama2c_checkpoint.h"

#include <cstdlib>
#include <cstring>

#include "core/base/error.h"

namespace draftlab {

namespace {

// The 7 int32 values at the start of a legacy llama2.c checkpoint (run.c's Config struct).
struct Llama2cHeader {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t vocab_size = 0;  // negative: an untied classifier (wcls) is stored at the end
  int32_t seq_len = 0;
};
constexpr size_t kHeaderBytes = 7 * sizeof(int32_t);

std::string header_values(const Llama2cHeader& h) {
  return "dim=" + std::to_string(h.dim) + ", hidden_dim=" + std::to_string(h.hidden_dim) +
         ", n_layers=" + std::to_string(h.n_layers) + ", n_heads=" + std::to_string(h.n_heads) +
         ", n_kv_heads=" + std::to_string(h.n_kv_heads) + ", vocab_size=" + std::to_string(h.vocab_size) +
         ", seq_len=" + std::to_string(h.seq_len);
}

void check_header(const std::string& path, const Llama2cHeader& h) {
  auto positive = [&](const char* field, int32_t v) {
    if (v <= 0) throw Error::in_file(path, std::string("header ") + field, "a positive integer", std::to_string(v));
  };
  positive("dim", h.dim);
  positive("hidden_dim", h.hidden_dim);
  positive("n_layers", h.n_layers);
  positive("n_heads", h.n_heads);
  positive("n_kv_heads", h.n_kv_heads);
  positive("seq_len", h.seq_len);
  if (h.vocab_size == 0 || h.vocab_size == INT32_MIN)
    throw Error::in_file(path, "header vocab_size", "a non-zero vocabulary size (negative = untied classifier)",
                         std::to_string(h.vocab_size));
  if (h.dim % h.n_heads != 0)
    throw Error::in_file(path, "header n_heads", "a divisor of dim (" + std::to_string(h.dim) + ")",
                         std::to_string(h.n_heads));
  if (h.n_heads % h.n_kv_heads != 0)
    throw Error::in_file(path, "header n_kv_heads", "a divisor of n_heads (" + std::to_string(h.n_heads) + ")",
                         std::to_string(h.n_kv_heads));
  if ((h.dim / h.n_heads) % 2 != 0)
    throw Error::in_file(path, "header n_heads", "a head size dim/n_heads that is even (RoPE rotates pairs)",
                         "head size " + std::to_string(h.dim / h.n_heads));
}

// One array of the file: its Hugging Face name (empty for skipped arrays), shape and position in floats.
struct Slot {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t float_offset = 0;
  uint64_t float_count = 0;
};

// Walks the file's arrays in order, adding up their sizes with overflow checks. Slots are only recorded when
// asked: the size check must run first, since a corrupted n_layers could otherwise ask for billions of entries.
class LayoutBuilder {
 public:
  explicit LayoutBuilder(bool record_slots) : record_slots_(record_slots) {}

  // `copies` arrays of `shape`, back to back, named by name_of(i).
  template <typename NameOf>
  void add(int64_t copies, const std::vector<int64_t>& shape, NameOf name_of) {
    uint64_t count = 1;
    for (int64_t d : shape) overflow_ |= __builtin_mul_overflow(count, static_cast<uint64_t>(d), &count);
    for (int64_t i = 0; record_slots_ && !overflow_ && i < copies; ++i)
      slots_.push_back({name_of(i), shape, total_floats_ + static_cast<uint64_t>(i) * count, count});
    uint64_t all = 0;
    overflow_ |= __builtin_mul_overflow(count, static_cast<uint64_t>(copies), &all);
    overflow_ |= __builtin_add_overflow(total_floats_, all, &total_floats_);
  }
  void skip(uint64_t floats) { overflow_ |= __builtin_add_overflow(total_floats_, floats, &total_floats_); }

  // Header plus all arrays, in bytes; false if that does not fit in 64 bits.
  bool file_bytes(uint64_t* out) const {
    uint64_t bytes = 0;
    if (overflow_ || __builtin_mul_overflow(total_floats_, uint64_t{4}, &bytes) ||
        __builtin_add_overflow(bytes, uint64_t{kHeaderBytes}, &bytes))
      return false;
    *out = bytes;
    return true;
  }
  const std::vector<Slot>& slots() const { return slots_; }

 private:
  bool record_slots_;
  std::vector<Slot> slots_;
  uint64_t total_floats_ = 0;
  bool overflow_ = false;
};

// The legacy v0 layout, as run.c's memory_map_weights reads it. Per-kind arrays hold all layers back to
// back ([L, out, in]); each layer becomes its own entry.
LayoutBuilder v0_layout(const Llama2cHeader& h, bool shared_classifier, bool record_slots) {
  const int64_t dim = h.dim, hidden = h.hidden_dim, layers = h.n_layers;
  const int64_t vocab = std::llabs(h.vocab_size);  // the sign only says whether wcls is stored
  const int64_t head_size = dim / h.n_heads;
  const int64_t kv_dim = head_size * h.n_kv_heads;

  LayoutBuilder b(record_slots);
  auto single = [](const char* name) { return [name](int64_t) { return std::string(name); }; };
  auto per_layer = [&](const std::string& suffix, const std::vector<int64_t>& shape) {
    b.add(layers, shape, [&suffix](int64_t i) { return "model.layers." + std::to_string(i) + "." + suffix; });
  };
  b.add(1, {vocab, dim}, single("model.embed_tokens.weight"));
  per_layer("input_layernorm.weight", {dim});
  per_layer("self_attn.q_proj.weight", {dim, dim});
  per_layer("self_attn.k_proj.weight", {kv_dim, dim});
  per_layer("self_attn.v_proj.weight", {kv_dim, dim});
  per_layer("self_attn.o_proj.weight", {dim, dim});
  per_layer("post_attention_layernorm.weight", {dim});
  per_layer("mlp.gate_proj.weight", {hidden, dim});  // w1
  per_layer("mlp.down_proj.weight", {dim, hidden});  // w2
  per_layer("mlp.up_proj.weight", {hidden, dim});    // w3
  b.add(1, {dim}, single("model.norm.weight"));
  // freq_cis_real and freq_cis_imag: precomputed RoPE tables that run.c no longer reads; we compute RoPE ourselves.
  const uint64_t freq_table_floats = static_cast<uint64_t>(h.seq_len) * static_cast<uint64_t>(head_size) / 2;
  b.skip(freq_table_floats);
  b.skip(freq_table_floats);
  if (!shared_classifier) b.add(1, {vocab, dim}, single("lm_head.weight"));
  return b;
}

}  // namespace

Llama2cCheckpoint::Llama2cCheckpoint(const std::string& path) : bytes_(path) {
  const uint64_t file_size = bytes_.size();
  if (file_size < kHeaderBytes)
    throw Error::in_file(path, "header", std::to_string(kHeaderBytes) + " bytes (7 int32 values)",
                         "a file of " + std::to_string(file_size) + " bytes");
  Llama2cHeader h;
  std::memcpy(&h, bytes_.data(), kHeaderBytes);  // the file is little-endian, like every host we build for
  check_header(path, h);

  shared_classifier_ = h.vocab_size > 0;
  uint64_t expected = 0;
  const bool fits = v0_layout(h, shared_classifier_, /*record_slots=*/false).file_bytes(&expected);
  if (!fits || expected != file_size) {
    std::string message = "file size: expected " + (fits ? std::to_string(expected) : std::string("more than 2^64")) +
                          " bytes for " + header_values(h) +
                          (shared_classifier_ ? " (shared classifier)" : " (untied classifier)") + ", file has " +
                          std::to_string(file_size);
    // A flipped vocab_size sign is the classic export mistake; say so when the other reading fits exactly.
    uint64_t other = 0;
    if (v0_layout(h, !shared_classifier_, /*record_slots=*/false).file_bytes(&other) && other == file_size)
      message += " - which is the size with " +
                 std::string(shared_classifier_ ? "an untied classifier (negative vocab_size)"
                                                : "a shared classifier (positive vocab_size)");
    throw Error::at(path, message);
  }

  // The size matches, so the header's counts are bounded by the file and the entries can be listed.
  const LayoutBuilder layout = v0_layout(h, shared_classifier_, /*record_slots=*/true);
  const uint8_t* floats = bytes_.data() + kHeaderBytes;
  for (const Slot& s : layout.slots()) {
    TensorEntry e;
    e.name = s.name;
    e.dtype = DType::F32;
    e.shape = s.shape;
    e.data = floats + s.float_offset * 4;
    e.nbytes = static_cast<size_t>(s.float_count * 4);
    e.file = path;
    tensors_.push_back(std::move(e));
  }

  config_.hidden_size = h.dim;
  config_.intermediate_size = h.hidden_dim;
  config_.num_hidden_layers = h.n_layers;
  config_.num_attention_heads = h.n_heads;
  config_.num_key_value_heads = h.n_kv_heads;
  config_.head_dim = h.dim / h.n_heads;
  config_.rms_norm_eps = 1e-5;  // run.c hard-codes this in rmsnorm()
  config_.rope_theta = 10000.0;  // and this in its RoPE
  config_.rope_scaling = RopeScaling{};
  config_.max_position_embeddings = h.seq_len;
  config_.vocab_size = std::llabs(h.vocab_size);
  config_.tie_word_embeddings = shared_classifier_;
  config_.bos_token_id = 1;
  // run.c has no EOS: it stops generating when the model samples BOS (id 1), which starts a new story.
  config_.eos_token_ids = {1};
  config_.validate(path);
}

const TensorEntry* Llama2cCheckpoint::find(const std::string& name) const {
  for (const TensorEntry& e : tensors_)
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace draftlab
