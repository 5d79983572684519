// The native CPU path held to the libtorch reference path on real checkpoints:
//   logits within 1e-4 of the logits' scale (float32 accumulation in another order; a wrong mask, RoPE or cache
//   row moves logits by their whole scale), greedy tokens identical over 48 steps;
//   a tree forward's rows bit-identical to chain forwards of their paths (what lossless verification rests on);
//   half-precision weight storage against the reference with its weights rounded the same way;
//   the EAGLE head on both paths; one KV cache layout for both; the float16 KV cache on both paths.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <functional>

#include "core/decoding/vanilla_decoder.h"
#include "strategies/eagle/eagle_head.h"
#include "core/base/error.h"
#include "model_fixtures.h"
#include "test_paths.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

constexpr double kTolerance = 1e-4;
// With a float16 KV cache both paths round the same keys and values to float16, but those values differ by float32
// rounding first (FMA or not, summation order), so an entry near a rounding boundary can land one float16 ulp
// (2^-11 relative) apart: measured up to 3.1e-4 on the portable kernels (stories260K, GQA), within 2 ulps.
constexpr double kHalfCacheTolerance = 1e-3;

ComputeOptions on(CpuPath path, const std::string& weights = "auto", const std::string& kv_cache = "auto") {
  ComputeOptions o;
  o.cpu_path = path;
  o.weights = parse_weight_storage(weights);
  o.kv_cache = parse_kv_cache_storage(kv_cache);
  return o;
}

// Every tree row's logits equal a chain forward of its root path on the same prefix, bit for bit.
void expect_tree_rows_equal_their_paths(const LlamaModel& model, const std::vector<int64_t>& p) {
  const LlamaModel* native = &model;
  const std::vector<int64_t> tokens{7, 8, 9, 10, 11, 12, 13};
  const std::vector<int64_t> parent{-1, 0, 0, 1, 1, 2, 5};
  const int64_t n = static_cast<int64_t>(tokens.size());
  auto mask = at::eye(n, at::kBool);
  std::vector<int64_t> depth(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t a = parent[i]; a >= 0; a = parent[a]) mask[i][a] = true;
    depth[i] = parent[i] < 0 ? 0 : depth[parent[i]] + 1;
  }
  KvCache tree_cache = native->make_cache(64);
  native->forward_chain(tree_cache, p);
  const int64_t L = tree_cache.length();
  std::vector<int64_t> positions(n);
  for (int64_t i = 0; i < n; ++i) positions[i] = L + depth[i];
  auto tree = native->forward(tree_cache, long_tensor(tokens), long_tensor(positions), mask);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> path;
    for (int64_t a = i; a >= 0; a = parent[a]) path.insert(path.begin(), tokens[a]);
    KvCache chain_cache = native->make_cache(64);
    native->forward_chain(chain_cache, p);
    // Decoded one token at a time, as vanilla decoding does.
    at::Tensor last;
    for (int64_t t : path) last = native->forward_chain(chain_cache, {t}).logits[0];
    EXPECT_TRUE(at::equal(tree.logits[i], last)) << "node " << i;
  }
}

struct Checkpoint {
  std::string label, path;  // path relative to the source tree ("src:") or to ../shared
  bool shared;
  std::string kv_cache = "auto";  // both paths' KV cache storage
};
void PrintTo(const Checkpoint& c, std::ostream* os) { *os << c.label; }

class NativeVersusReference : public ::testing::TestWithParam<Checkpoint> {
 protected:
  void SetUp() override {
    const Checkpoint& c = GetParam();
    if (c.shared) DRAFTLAB_REQUIRE_SHARED(c.path);
    path = c.shared ? shared_path(c.path) : source_path(c.path);
    native = LlamaModel::load(path, on(CpuPath::Native, "auto", c.kv_cache));
    reference = LlamaModel::load(path, on(CpuPath::Reference, "auto", c.kv_cache));
    ASSERT_NE(native->native(), nullptr);
    ASSERT_EQ(reference->native(), nullptr);
  }
  std::vector<int64_t> prompt() const {
    std::vector<int64_t> p{1};
    for (int64_t i = 0; i < 23; ++i) p.push_back((37 * i + 11) % native->config().vocab_size);
    return p;
  }
  double tolerance() const { return GetParam().kv_cache == "float16" ? kHalfCacheTolerance : kTolerance; }
  std::string path;
  std::unique_ptr<LlamaModel> native, reference;
};

TEST_P(NativeVersusReference, LogitsAgreeForPrefillDecodeAndTree) {
  KvCache a = native->make_cache(64), b = reference->make_cache(64);
  const auto p = prompt();
  auto na = native->forward_chain(a, p), rb = reference->forward_chain(b, p);
  EXPECT_LT(rel_diff(na.logits, rb.logits), tolerance());
  EXPECT_LT(rel_diff(na.features, rb.features), tolerance());
  for (int64_t step : {5, 9, 2}) {
    auto x = native->forward_chain(a, {step}), y = reference->forward_chain(b, {step});
    EXPECT_LT(rel_diff(x.logits, y.logits), tolerance()) << "decode step " << step;
  }
  // A tree of 5 after the prefix: 0 -> {1, 2}, 1 -> 3, 2 -> 4.
  auto mask = at::eye(5, at::kBool);
  for (auto [child, parent] : {std::pair{1, 0}, {2, 0}, {3, 1}, {3, 0}, {4, 2}, {4, 0}}) mask[child][parent] = true;
  const auto tokens = long_tensor({7, 8, 9, 10, 11});
  const int64_t L = a.length();
  const auto positions = long_tensor({L, L + 1, L + 1, L + 2, L + 2});
  ForwardOptions capture;  // EAGLE-3's layer features, written by the native layers as they run
  capture.feature_layers = {0, native->config().num_hidden_layers - 1};
  auto tx = native->forward(a, tokens, positions, mask, capture);
  auto ty = reference->forward(b, tokens, positions, mask, capture);
  EXPECT_LT(rel_diff(tx.logits, ty.logits), tolerance());
  ASSERT_EQ(tx.features.size(1), 2 * native->config().hidden_size);
  EXPECT_LT(rel_diff(tx.features, ty.features), tolerance());
  // Selected rows only.
  ForwardOptions rows;
  rows.logits = ForwardOptions::Logits::Rows;
  rows.rows = long_tensor({4, 1});
  a.truncate(L);
  b.truncate(L);
  auto sx = native->forward(a, tokens, positions, mask, rows);
  EXPECT_TRUE(at::equal(sx.logits, tx.logits.index_select(0, rows.rows)));
}

TEST_P(NativeVersusReference, GreedyTokensIdentical) {
  GenerationConfig gen;
  gen.max_new_tokens = 48;
  EXPECT_EQ(generate_vanilla(*native, prompt(), gen).tokens, generate_vanilla(*reference, prompt(), gen).tokens);
}

// Every tree row's logits equal a chain forward of its root path on the same prefix, bit for bit.
TEST_P(NativeVersusReference, TreeRowsAreBitIdenticalToTheirPathsOnTheNativePath) {
  expect_tree_rows_equal_their_paths(*native, prompt());
}

// One cache layout: a prefix cached by one path, continued by the other.
TEST_P(NativeVersusReference, CachesAreInterchangeable) {
  KvCache mixed = native->make_cache(64), plain = reference->make_cache(64);
  native->forward_chain(mixed, prompt());
  reference->forward_chain(plain, prompt());
  auto x = reference->forward_chain(mixed, {3, 4});
  auto y = reference->forward_chain(plain, {3, 4});
  EXPECT_LT(rel_diff(x.logits, y.logits), tolerance());
}

// The native path keeps the layer projections only in its packed copy (the memory a float32 copy would take);
// weights() gives them back with the checkpoint's exact values, as the reference path holds them.
TEST_P(NativeVersusReference, WeightsRebuiltFromThePackedCopyAreTheCheckpoints) {
  EXPECT_FALSE(native->holds_projections());
  EXPECT_TRUE(reference->holds_projections());
  const auto want = hf_named_tensors(reference->config(), reference->weights(), at::kFloat);
  int64_t parameters = 0;  // num_parameters() comes from the config: hold it to the tensors
  for (const auto& [name, t] : want) parameters += t.numel();
  EXPECT_EQ(native->num_parameters(), parameters);
  const auto got = hf_named_tensors(native->config(), native->weights(), at::kFloat);
  EXPECT_TRUE(native->holds_projections());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_TRUE(at::equal(got[i].second, want[i].second)) << got[i].first;
  }
  // Forwards after the rebuild still run on the packed copy and agree with the reference.
  KvCache a = native->make_cache(32), b = reference->make_cache(32);
  EXPECT_LT(rel_diff(native->forward_chain(a, prompt()).logits, reference->forward_chain(b, prompt()).logits),
            tolerance());
}

// The LM head's float32 tensor (and a tied embedding) is dropped with the projections: the forward reads token
// rows from the packed LM head, and embedding() / lm_head() rebuild the checkpoint's values without the layers.
TEST_P(NativeVersusReference, EmbeddingAndLmHeadComeBackFromThePackedLmHeadAlone) {
  const int64_t V = native->config().vocab_size, d = native->config().hidden_size;
  const std::vector<int64_t> tokens{0, 1, V / 2, V - 1};
  std::vector<float> rows(tokens.size() * (d + 3), -1.0f);  // row stride d + 3: the gaps stay untouched
  native->embedding_rows(tokens.data(), static_cast<int64_t>(tokens.size()), rows.data(), d + 3);
  const at::Tensor want = reference->embedding().to(at::kFloat);
  for (size_t j = 0; j < tokens.size(); ++j) {
    const auto got = at::from_blob(rows.data() + j * (d + 3), {d}, at::kFloat);
    EXPECT_TRUE(at::equal(got, want[tokens[j]])) << "token " << tokens[j];
    EXPECT_EQ(rows[j * (d + 3) + d], -1.0f);
  }
  EXPECT_TRUE(at::equal(native->embedding(), reference->embedding()));
  EXPECT_TRUE(at::equal(native->lm_head(), reference->lm_head()));
  EXPECT_FALSE(native->holds_projections()) << "the layers' projections stay in the packed copy only";
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, NativeVersusReference,
                         ::testing::Values(Checkpoint{"ts_tiny", "data/models/ts-tiny", false},
                                           Checkpoint{"aidreams260K", "models/aidreams260K/aidreams260K.bin", true},
                                           Checkpoint{"stories260K_gqa", "models/stories260K/stories260K.bin", true},
                                           // A mixture of experts (Mixtral layout).
                                           Checkpoint{"ts_moe", "data/models/ts-moe", false},
                                           // The float16 KV cache, on both paths.
                                           Checkpoint{"ts_tiny_kv16", "data/models/ts-tiny", false, "float16"},
                                           Checkpoint{"stories260K_gqa_kv16", "models/stories260K/stories260K.bin",
                                                      true, "float16"}),
                         [](const auto& info) { return info.param.label; });

// float16 / bfloat16 storage: the native path reads the rounded weights; the reference with weights rounded to
// the same values (then float32) must agree to float32-accumulation error.
TEST(NativeWeightStorage, HalfPrecisionMatchesReferenceOnRoundedWeights) {
  for (const char* storage : {"float16", "bfloat16"}) {
    SCOPED_TRACE(storage);
    const at::ScalarType half = std::string(storage) == "float16" ? at::kHalf : at::kBFloat16;
    ModelConfig c = tiny_config(2, false, 97);
    LlamaWeights w = random_llama_weights(c, 3, ComputeOptions{});
    auto round = [&](at::Tensor& t) { t = t.to(half).to(at::kFloat); };
    round(w.embed);
    round(w.norm);
    round(w.lm_head);
    for (auto& L : w.layers)
      for (at::Tensor* t : {&L.attn_norm, &L.wqkv, &L.wo, &L.mlp_norm, &L.w_gate_up, &L.w_down}) round(*t);
    use_column_major(w);
    LlamaModel native(c, w, on(CpuPath::Native, storage));
    LlamaModel reference(c, w, on(CpuPath::Reference));
    ASSERT_EQ(weight_storage_name(native.native()->storage()), std::string(storage));
    KvCache a = native.make_cache(32), b = reference.make_cache(32);
    const std::vector<int64_t> p{1, 5, 9, 26, 53, 58, 93, 23};
    EXPECT_LT(rel_diff(native.forward_chain(a, p).logits, reference.forward_chain(b, p).logits), kTolerance);
  }
  // The default storage is the checkpoint's: ts-tiny stores float16.
  auto stored = LlamaModel::load(source_path("data/models/ts-tiny"), ComputeOptions{});
  ASSERT_NE(stored->native(), nullptr);
  EXPECT_EQ(stored->native()->storage(), WeightStorage::Float16);
  EXPECT_EQ(stored->native()->weight_bytes() * 2,
            LlamaModel::load(source_path("data/models/ts-tiny"), on(CpuPath::Native, "float32"))->native()->weight_bytes());
}

// Packing a float32 checkpoint in float16 rounds it: then the float32 projections stay, so weights() is still the
// checkpoint's (training and export never see rounded values).
TEST(NativeWeightStorage, RoundedPackingKeepsTheCheckpointsTensors) {
  DRAFTLAB_REQUIRE_SHARED("models/stories260K/stories260K.bin");
  const std::string path = shared_path("models/stories260K/stories260K.bin");
  auto half = LlamaModel::load(path, on(CpuPath::Native, "float16"));
  auto reference = LlamaModel::load(path, on(CpuPath::Reference));
  EXPECT_TRUE(half->holds_projections());
  const auto got = hf_named_tensors(half->config(), half->weights(), at::kFloat);
  const auto want = hf_named_tensors(reference->config(), reference->weights(), at::kFloat);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(at::equal(got[i].second, want[i].second)) << got[i].first;
  // Weights made in memory are float32: packed as float32, released, and rebuilt bit for bit.
  ModelConfig c = tiny_config(2, false, 97);
  LlamaWeights w = random_llama_weights(c, 5, ComputeOptions{});
  LlamaModel in_memory(c, w, on(CpuPath::Native));
  EXPECT_FALSE(in_memory.holds_projections());
  EXPECT_TRUE(at::equal(in_memory.weights().layers[1].w_down, w.layers[1].w_down));
  EXPECT_TRUE(at::equal(in_memory.weights().layers[0].wqkv, w.layers[0].wqkv));
}

// A float16 KV cache stores half the bytes, and its keys and values are the float32 cache's rounded to float16.
TEST(NativeKvCache, Float16CacheHoldsTheRoundedRows) {
  auto wide = LlamaModel::load(source_path("data/models/ts-tiny"), on(CpuPath::Native));
  auto narrow = LlamaModel::load(source_path("data/models/ts-tiny"), on(CpuPath::Native, "auto", "float16"));
  KvCache a = wide->make_cache(32), b = narrow->make_cache(32);
  ASSERT_EQ(a.dtype(), at::kFloat);
  ASSERT_EQ(b.dtype(), at::kHalf);
  const std::vector<int64_t> p{1, 5, 9, 26, 53, 58, 93, 23};
  const auto x = wide->forward_chain(a, p), y = narrow->forward_chain(b, p);
  // Layer 0's keys and values depend only on the embeddings: exactly the float32 rows rounded.
  EXPECT_TRUE(at::equal(a.keys(0, 8).to(at::kHalf), b.keys(0, 8)));
  EXPECT_TRUE(at::equal(a.values(0, 8).to(at::kHalf), b.values(0, 8)));
  // Rounding the cache moves the logits a little, not by their scale.
  EXPECT_LT(rel_diff(x.logits, y.logits), 1e-2);
  EXPECT_NE(narrow->path_description().find("float16 KV cache"), std::string::npos) << narrow->path_description();
}

TEST(NativeWeightStorage, PathAndStorageNamesAreChecked) {
  EXPECT_THROW(parse_cpu_path("fast"), Error);
  EXPECT_THROW(parse_weight_storage("int8"), Error);
  EXPECT_THROW(parse_kv_cache_storage("int8"), Error);
  ComputeOptions bf16 = on(CpuPath::Native);
  bf16.dtype = at::kBFloat16;
  EXPECT_THROW(uses_native_path(bf16), Error);  // native asked for, cannot apply
  bf16.cpu_path = CpuPath::Auto;
  EXPECT_FALSE(uses_native_path(bf16));
}

// The EAGLE head follows its target's path; both give the same drafts.
TEST(NativeEagleHead, MatchesTheReferenceHead) {
  auto native = LlamaModel::load(source_path("data/models/ts-tiny"), on(CpuPath::Native));
  auto reference = LlamaModel::load(source_path("data/models/ts-tiny"), on(CpuPath::Reference));
  for (const char* variant : {kEagleInputFeatureShiftedToken, kEagleInputFeatureOnly, kEagleInputTokenOnly}) {
    SCOPED_TRACE(variant);
    auto hn = EagleHead::load(source_path("data/models/ts-tiny-eagle-head"), *native);
    if (std::string(variant) != kEagleInputFeatureShiftedToken) hn = EagleHead::random(*native, 5, variant);
    auto hr = std::string(variant) == kEagleInputFeatureShiftedToken
                  ? EagleHead::load(source_path("data/models/ts-tiny-eagle-head"), *reference)
                  : EagleHead::random(*reference, 5, variant);
    KvCache cn = hn->make_cache(32), cr = hr->make_cache(32);
    const auto tokens = long_tensor({5, 6, 7, 8});
    const auto features = at::randn({4, native->config().hidden_size});
    const auto positions = long_tensor({0, 1, 2, 3});
    auto fn = hn->forward(cn, tokens, features, positions), fr = hr->forward(cr, tokens, features, positions);
    EXPECT_LT(rel_diff(fn, fr), kTolerance);
    EXPECT_LT(rel_diff(hn->logits(fn), hr->logits(fr)), kTolerance);
    // Tree rows with an explicit visibility over cache + new rows (siblings hidden).
    auto visible = at::ones({2, 6}, at::kBool);
    visible[0][5] = false;
    visible[1][4] = false;
    const auto t2 = long_tensor({9, 10});
    const auto f2 = at::randn({2, native->config().hidden_size});
    const auto p2 = long_tensor({4, 4});
    EXPECT_LT(rel_diff(hn->forward_visible(cn, t2, f2, p2, visible), hr->forward_visible(cr, t2, f2, p2, visible)),
              kTolerance);
  }
}

}  // namespace

namespace {

// q8_0 / q4_0 weights met by int8 dot products (activations quantized to Q8_0 per row, as llama.cpp does): the
// logits move by the activations' rounding only, against the same weights in float; tree rows stay bit for bit
// their paths' (lossless verification); two threads give one thread's bits; the heads follow the target.
TEST(NativeInt8Dot, CloseToTheFloatProductAndRowIndependent) {
  const std::string path = source_path("data/models/ts-tiny");
  const std::vector<int64_t> p{1, 5, 9, 26, 53, 58, 93, 23, 84, 62, 7, 300};
  for (const char* storage : {"q8_0", "q4_0"}) {
    SCOPED_TRACE(storage);
    ComputeOptions int8 = on(CpuPath::Native, storage);
    int8.block_dot = BlockDot::Int8;
    const auto model = LlamaModel::load(path, int8);
    const auto wide = LlamaModel::load(path, on(CpuPath::Native, storage));
    ASSERT_EQ(model->native()->dot(), BlockDot::Int8);
    EXPECT_EQ(wide->native()->dot(), BlockDot::Float);
    EXPECT_NE(model->path_description().find("int8 dot products"), std::string::npos) << model->path_description();
    KvCache a = model->make_cache(64), b = wide->make_cache(64);
    const at::Tensor x = model->forward_chain(a, p).logits, y = wide->forward_chain(b, p).logits;
    // Measured 6.5e-3 (q8_0) and 7.9e-3 (q4_0) of the logits' scale; a wrong scale, offset or block is order 1.
    EXPECT_LT(rel_diff(x, y), 2e-2);
    EXPECT_FALSE(at::equal(x, y)) << "int8 dot products were not used";
    expect_tree_rows_equal_their_paths(*model, p);
    const int previous = at::get_num_threads();
    auto run = [&](int threads) {
      at::set_num_threads(threads);
      KvCache cache = model->make_cache(64);
      model->forward_chain(cache, p);
      return model->forward_chain(cache, {3, 4, 5, 6, 7, 8, 9}).logits;
    };
    const auto one = run(1), two = run(2);
    at::set_num_threads(previous);
    EXPECT_TRUE(at::equal(one, two));
    // The EAGLE head packs its layer as the target does.
    const auto head = EagleHead::load(source_path("data/models/ts-tiny-eagle-head"), *model);
    KvCache hc = head->make_cache(16);
    const auto h = head->forward(hc, long_tensor({5, 6, 7}), at::randn({3, model->config().hidden_size}),
                                 long_tensor({0, 1, 2}));
    EXPECT_TRUE(at::isfinite(head->logits(h)).all().item<bool>());
  }
}

TEST(NativeInt8Dot, RefusedWhereItCannotApply) {
  const std::string path = source_path("data/models/ts-tiny");
  EXPECT_THROW(parse_block_dot("int4"), Error);
  EXPECT_EQ(parse_block_dot("int8"), BlockDot::Int8);
  auto expect_error = [](const std::function<void()>& load, const std::vector<std::string>& parts) {
    try {
      load();
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      for (const auto& part : parts)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << part << " missing from: " << e.what();
    }
  };
  ComputeOptions o = on(CpuPath::Native, "float16");
  o.block_dot = BlockDot::Int8;
  expect_error([&] { LlamaModel::load(path, o); }, {"--quant-dot int8", "q8_0 or q4_0", "float16"});
  o = on(CpuPath::Reference, "q8_0");
  o.block_dot = BlockDot::Int8;
  expect_error([&] { LlamaModel::load(path, o); }, {"--quant-dot int8", "native path"});
  // Block-quantized weights need whole blocks: stories260K's MLP is 172 wide.
  DRAFTLAB_REQUIRE_SHARED("models/stories260K/stories260K.bin");
  expect_error([&] { LlamaModel::load(shared_path("models/stories260K/stories260K.bin"), on(CpuPath::Native, "q8_0")); },
               {"--weights q8_0", "intermediate_size", "172"});
}

// Threads split the products by panels and attention by rows: no output's arithmetic changes, so the bits don't.
TEST(NativeThreads, TwoThreadsGiveTheSameBitsAsOne) {
  auto model = LlamaModel::load(source_path("data/models/ts-tiny"), on(CpuPath::Native));
  const int previous = at::get_num_threads();
  auto run = [&](int threads) {
    at::set_num_threads(threads);
    KvCache cache = model->make_cache(64);
    model->forward_chain(cache, {1, 5, 9, 26, 53, 58, 93, 23, 84, 62});
    return model->forward_chain(cache, {3, 4, 5, 6, 7, 8, 9}).logits;
  };
  const auto one = run(1), two = run(2);
  at::set_num_threads(previous);
  EXPECT_TRUE(at::equal(one, two));
}

}  // namespace
