// The HDF5 feature cache of head training: it replays the on-the-fly windows and features (float32: bit for bit;
// float16: within its rounding), a whole training run gives the same loss curve with and without it, a cache of
// another model / context / data is refused naming the field and both values, and the loss mask really removes
// masked tokens from the loss.
#include <gtest/gtest.h>

#include <H5Cpp.h>

#include <functional>

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <fstream>

#include "core/model/rope.h"
#include "core/model/training_forward.h"
#include "core/training/chat_dataset.h"
#include "strategies/eagle3/eagle3_training.h"
#include "strategies/eagle/eagle_head_training.h"
#include "core/training/feature_cache.h"
#include "model_fixtures.h"
#include "test_errors.h"
#include "test_paths.h"

namespace draftlab {
namespace {

TextDataset random_dataset(uint64_t seed, bool masked = false) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto draw = [&](int64_t n) {
    const auto t = at::randint(97, {n}, gen, at::TensorOptions().dtype(at::kLong));
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(t[i].item<int64_t>());
    return v;
  };
  std::vector<int32_t> train = draw(600), validation = draw(200);
  if (!masked) return TextDataset(train, validation);
  auto mask = [](const std::vector<int32_t>& v) {  // an arbitrary but fixed 0/1 pattern
    std::vector<uint8_t> m;
    for (int32_t t : v) m.push_back(t % 3 != 0);
    return m;
  };
  return TextDataset(train, validation, mask(train), mask(validation), 2);
}

FeatureCacheIdentity identity_for(const LlamaModel& target, const TextDataset& data, int64_t context) {
  FeatureCacheIdentity id;
  id.model_checksum = model_weights_checksum(target);
  id.model_path = "tiny";
  id.tokenizer = "tok";
  id.data = data.fingerprint();
  id.data_source = "random";
  id.context = context;
  id.batch = 4;
  id.seed = 9;
  id.hidden_size = target.config().hidden_size;
  return id;
}

std::string fresh(const std::string& name) {
  const std::string p = testing::temp_dir() + "/" + name;
  std::filesystem::remove_all(p);
  return p;
}

// A copy of the cache at `path`, at temp_dir()/name, changed by `edit`.
std::string edited_copy(const std::string& path, const std::string& name, const std::function<void(H5::H5File&)>& edit) {
  const std::string copy = fresh(name);
  std::filesystem::copy_file(path, copy);
  H5::H5File file(copy, H5F_ACC_RDWR);
  edit(file);
  return copy;
}

// The tiny target, random data (random_dataset(seed, masked)) and a cache of `steps` steps of context 16 built from
// them at temp_dir()/name.
struct BuiltCache {
  std::unique_ptr<LlamaModel> target;
  TextDataset data;
  FeatureCacheIdentity id;
  std::string path;
};
BuiltCache built_cache(const std::string& name, uint64_t seed, bool masked, int64_t steps, at::ScalarType dtype) {
  BuiltCache c{testing::tiny_model(), random_dataset(seed, masked), {}, fresh(name)};
  c.id = identity_for(*c.target, c.data, 16);
  FeatureCache::build(c.path, *c.target, c.data, c.id, steps, dtype);
  return c;
}

TEST(FeatureCache, Float32ReplaysTheOnTheFlyWindowsFeaturesAndLossBitwise) {
  const BuiltCache built = built_cache("cache32.h5", 1, /*masked=*/true, 3, at::kFloat);
  const auto& target = built.target;
  const auto& data = built.data;
  const auto& id = built.id;
  const auto& path = built.path;
  EXPECT_FALSE(testing::temporary_left(path));
  const auto cache = FeatureCache::open(path, *target, id);
  EXPECT_EQ(cache->windows(), 12);
  EXPECT_TRUE(cache->has_mask());
  HeadTrainingModel model(*target, 5);
  const RotaryEmbedding rope(target->config(), target->options());
  for (int64_t s = 0; s < 3; ++s) {
    const auto windows = data.train_batch(4, 16, 9, s);
    const CachedBatch b = cache->batch(s);
    ASSERT_TRUE(at::equal(b.windows, windows)) << "step " << s;
    EXPECT_TRUE(at::equal(b.mask, data.train_rows(4, 16, 9, s).mask));
    at::NoGradGuard no_grad;
    EXPECT_TRUE(at::equal(b.features, training_features(target->config(), target->weights(), rope, windows)));
    const double fly = model.loss(windows, 100 + s, 0.1, b.mask).loss.item<double>();
    const double cached = model.loss(b.windows, 100 + s, 0.1, b.mask, b.features).loss.item<double>();
    EXPECT_EQ(fly, cached) << "step " << s;
  }
  // Past the cached steps: rows of the cache drawn by (seed, step), the same on every call.
  const CachedBatch late = cache->batch(7);
  EXPECT_TRUE(at::equal(late.windows, cache->batch(7).windows));
  EXPECT_EQ(late.features.size(0), 4);
}

TEST(FeatureCache, Float16StaysWithinHalfPrecisionRounding) {
  // Features round to 11 significant bits (relative error <= 2^-11 = 4.9e-4 each). SmoothL1 and the soft CE are
  // Lipschitz in the features with constants of order one here, so the loss moves by about that relative amount;
  // 2e-3 relative leaves a factor 4 of margin and is still far below the loss's own step-to-step changes.
  const BuiltCache built = built_cache("cache16.h5", 2, false, 2, at::kHalf);
  const auto& target = built.target;
  const auto& id = built.id;
  const auto& path = built.path;
  const auto cache = FeatureCache::open(path, *target, id);
  EXPECT_EQ(cache->feature_dtype(), at::kHalf);
  HeadTrainingModel model(*target, 5);
  for (int64_t s = 0; s < 2; ++s) {
    const CachedBatch b = cache->batch(s);
    EXPECT_FALSE(b.mask.defined());
    const double fly = model.loss(b.windows, -1).loss.item<double>();
    const double cached = model.loss(b.windows, -1, 0.1, {}, b.features).loss.item<double>();
    EXPECT_NEAR(cached, fly, 2e-3 * std::abs(fly));
    EXPECT_NE(cached, fly);  // the features did go through float16
  }
}

TrainingCurves train(const LlamaModel& target, const TextDataset& data, const std::string& cache, int64_t cache_steps,
                     const std::string& out) {
  EagleHeadTrainingOptions o;
  o.trainer.steps = 5;
  o.trainer.lr = 1e-3;
  o.trainer.warmup = 1;
  o.trainer.eval_every = 0;
  o.trainer.quiet = true;
  o.batch = 4;
  o.context = 16;
  o.seed = 9;
  o.eval_windows = 4;
  o.out_dir = fresh(out);
  o.feature_cache.path = cache;
  o.feature_cache.steps = cache_steps;
  o.feature_cache.quiet = true;
  return train_eagle_head(target, o, data).curves;
}

TEST(FeatureCache, TrainingWithTheCacheGivesTheOnTheFlyLossCurve) {
  auto target = testing::tiny_model();
  const TextDataset data = random_dataset(3, /*masked=*/true);
  const auto fly = train(*target, data, "", 0, "run_fly");
  const std::string path = fresh("run_cache.h5");
  const auto built = train(*target, data, path, 0, "run_built");   // builds the cache (all 5 steps), then trains
  const auto reused = train(*target, data, path, 0, "run_reused");  // reads it back
  ASSERT_EQ(fly.train_loss.size(), 5u);
  EXPECT_EQ(built.train_loss, fly.train_loss);
  EXPECT_EQ(reused.train_loss, fly.train_loss);
  // A 2-step cache: the first two steps are the on-the-fly ones, later steps draw other windows from the cache.
  const std::string small = fresh("run_small.h5");
  const auto partial = train(*target, data, small, 2, "run_small");
  EXPECT_EQ(partial.train_loss[0], fly.train_loss[0]);
  EXPECT_EQ(partial.train_loss[1], fly.train_loss[1]);
  EXPECT_NE(partial.train_loss[4], fly.train_loss[4]);
}

// EAGLE-3 heads read three target layers besides the final feature: the cache holds them too ([N, T + 1, 4d],
// its identity names the layers), and replays the on-the-fly run exactly; a cache of plain features is refused.
TEST(FeatureCache, EagleThreeLayerFeaturesReplayExactly) {
  auto target = testing::tiny_model();
  const TextDataset data = random_dataset(3, /*masked=*/true);
  auto run = [&](const std::string& cache, const std::string& out) {
    Eagle3TrainingOptions o;
    o.trainer.steps = 4;
    o.trainer.lr = 1e-3;
    o.trainer.warmup = 1;
    o.trainer.eval_every = 0;
    o.trainer.quiet = true;
    o.batch = 4;
    o.context = 16;
    o.seed = 9;
    o.eval_windows = 4;
    o.steps = 3;
    o.out_dir = fresh(out);
    o.feature_cache.path = cache;
    o.feature_cache.quiet = true;
    return train_eagle3_head(*target, o, data).curves;
  };
  const auto fly = run("", "e3_fly");
  const std::string path = fresh("e3_cache.h5");
  EXPECT_EQ(run(path, "e3_built").train_loss, fly.train_loss);
  EXPECT_EQ(run(path, "e3_reused").train_loss, fly.train_loss);
  ASSERT_EQ(fly.train_loss.size(), 4u);
  const std::string plain = fresh("e3_plain.h5");
  train(*target, data, plain, 0, "e3_plain_run");  // an EAGLE-1/2 run's cache: final features only
  testing::expect_error([&] { run(plain, "e3_refused"); }, {plain, "feature_layers", "none"});
}

TEST(FeatureCache, ACacheOfAnotherModelContextOrDataIsRefused) {
  const BuiltCache built = built_cache("refuse.h5", 4, false, 1, at::kFloat);
  const auto& target = built.target;
  const auto& data = built.data;
  const auto& id = built.id;
  const auto& path = built.path;
  auto other = testing::tiny_model(at::kFloat, 2, /*seed=*/8);

  const auto other_id = identity_for(*other, data, 16);
  ASSERT_NE(other_id.model_checksum, id.model_checksum);
  testing::expect_error([&] { FeatureCache::open(path, *other, other_id); },
                        {path, "model_checksum", other_id.model_checksum, id.model_checksum});
  auto ctx = identity_for(*target, data, 12);
  testing::expect_error([&] { FeatureCache::open(path, *target, ctx); }, {path, "context", "'12'", "'16'"});
  const TextDataset other_data = random_dataset(5);
  const auto data_id = identity_for(*target, other_data, 16);
  testing::expect_error([&] { FeatureCache::open(path, *target, data_id); },
                        {path, "data", other_data.fingerprint(), data.fingerprint()});
  auto tok = id;
  tok.tokenizer = "another";
  testing::expect_error([&] { FeatureCache::open(path, *target, tok); }, {path, "tokenizer", "'another'", "'tok'"});
  // An identity attribute of many values (what overran the results reader's stack, found by fuzzing): an Error.
  const std::string many = edited_copy(path, "many_values.h5", [](H5::H5File& file) {
    H5::Group root = file.openGroup("/");
    root.removeAttr("context");
    H5::StrType t(H5::PredType::C_S1, H5T_VARIABLE);
    const std::vector<const char*> values(64, "16");
    const hsize_t n[1] = {64};
    root.createAttribute("context", t, H5::DataSpace(1, n)).write(t, values.data());
  });
  testing::expect_error([&] { FeatureCache::open(many, *target, id); }, {many, "attribute context", "an attribute of 64 values"});
  // Not a cache at all, and a cache that cannot be written: an Error, no file left behind.
  const std::string junk = testing::temp_dir() + "/junk.h5";
  std::ofstream(junk) << "not hdf5";
  testing::expect_error([&] { FeatureCache::open(junk, *target, id); }, {junk, "not a readable HDF5"});
  const std::string nowhere = testing::temp_dir() + "/no/such/dir/c.h5";
  testing::expect_error([&] { FeatureCache::build(nowhere, *target, data, id, 1, at::kFloat); }, {nowhere});
  EXPECT_FALSE(testing::temporary_left(nowhere));
}

// Datasets a cache writer of ours cannot produce (found missing by the feature_cache fuzz target's design): each an
// Error naming the file, the field and what was expected, before any value reaches training.
TEST(FeatureCache, MalformedDatasetsAndValuesAreRefusedNamingTheField) {
  const BuiltCache built = built_cache("malformed.h5", 4, false, 1, at::kFloat);
  const auto& target = built.target;
  const auto& data = built.data;
  const auto& id = built.id;
  const auto& path = built.path;
  const hsize_t N = static_cast<hsize_t>(id.batch), T = 17, d = static_cast<hsize_t>(id.width());
  const std::string n = std::to_string(N), nT = "[" + n + ", 17", nTd = nT + ", " + std::to_string(d);
  int copies = 0;
  auto edited = [&](const std::function<void(H5::H5File&)>& edit) {
    return edited_copy(path, "malformed_" + std::to_string(copies++) + ".h5", edit);
  };
  auto set_attribute = [](H5::H5File& file, const std::string& key, const std::string& value) {
    H5::Group root = file.openGroup("/");
    root.removeAttr(key);
    H5::StrType t(H5::PredType::C_S1, value.size());
    root.createAttribute(key, t, H5::DataSpace(H5S_SCALAR)).write(t, value);
  };
  // features of another rank (the reader's fixed 3-entry shape buffer took any rank before).
  const std::string rank4 = edited([&](H5::H5File& f) {
    f.unlink("features");
    const hsize_t dims[4] = {N, T, d, 2};
    f.createDataSet("features", H5::PredType::IEEE_F32LE, H5::DataSpace(4, dims));
  });
  testing::expect_error([&] { FeatureCache::open(rank4, *target, id); }, {rank4, "features", nTd + "]", nTd + ", 2]"});
  // features of a type the feature_dtype attribute does not name.
  const std::string f64 = edited([&](H5::H5File& f) {
    f.unlink("features");
    const hsize_t dims[3] = {N, T, d};
    f.createDataSet("features", H5::PredType::IEEE_F64LE, H5::DataSpace(3, dims));
  });
  testing::expect_error([&] { FeatureCache::open(f64, *target, id); }, {f64, "features", "float32", "8-byte"});
  // steps: not an integer, below 1, so large that steps x batch overflows, or more than the datasets hold.
  for (const std::string& steps : {std::string("x"), std::string("0"), std::string("9223372036854775807")}) {
    const std::string bad = edited([&](H5::H5File& f) { set_attribute(f, "steps", steps); });
    testing::expect_error([&] { FeatureCache::open(bad, *target, id); }, {bad, "steps", "an integer >= 1", steps});
  }
  const std::string two = edited([&](H5::H5File& f) { set_attribute(f, "steps", "2"); });
  testing::expect_error([&] { FeatureCache::open(two, *target, id); }, {two, "windows", "[" + std::to_string(2 * N) + ", 17]", "shape " + nT + "]"});
  // A token outside the target's vocabulary: refused when its row is read, naming the row.
  const std::string token = edited([&](H5::H5File& f) {
    H5::DataSet w = f.openDataSet("windows");
    std::vector<int64_t> ids(N * T, 3);
    ids[2 * 17 + 5] = target->config().vocab_size;
    w.write(ids.data(), H5::PredType::NATIVE_INT64);
  });
  auto cache = FeatureCache::open(token, *target, id);
  testing::expect_error([&] { cache->batch(0); },
                        {token, "windows row 2", "0.." + std::to_string(target->config().vocab_size - 1),
                         std::to_string(target->config().vocab_size)});
}

// Random sequences of 5..30 tokens with a fixed mask pattern, sampled Whole (train-head's default).
TextDataset sequence_dataset(uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<MaskedSequence> sequences;
  for (int i = 0; i < 40; ++i) {
    const int64_t n = 5 + at::randint(26, {1}, gen, at::TensorOptions().dtype(at::kLong)).item<int64_t>();
    const auto t = at::randint(97, {n}, gen, at::TensorOptions().dtype(at::kLong));
    MaskedSequence s;
    for (int64_t k = 0; k < n; ++k) s.tokens.push_back(static_cast<int32_t>(t[k].item<int64_t>())), s.mask.push_back(k > 2);
    sequences.push_back(s);
  }
  TextDataset data = split_sequences(sequences, 5, /*masked=*/true, "random sequences");
  data.set_sampling(Sampling::Whole);
  return data;
}

// Whole-sequence rows are right-padded to context + 1: under causal attention the padding changes nothing before
// it, so a row's features are those of its sequence alone, from its first token (what the head sees at inference).
TEST(WholeSequences, PaddedRowFeaturesEqualTheSequenceAlone) {
  auto target = testing::tiny_model();
  const TextDataset data = sequence_dataset(6);
  const RotaryEmbedding rope(target->config(), target->options());
  at::NoGradGuard no_grad;
  const auto rows = data.train_batch(6, 24, 3, 0);
  const auto lengths = data.train_rows(6, 24, 3, 0).lengths;
  const auto f = training_features(target->config(), target->weights(), rope, rows);
  int padded = 0;
  for (int64_t b = 0; b < rows.size(0); ++b) {
    const int64_t n = lengths[b].item<int64_t>();
    padded += n < 25;
    const auto alone = training_features(target->config(), target->weights(), rope, rows[b].narrow(0, 0, n).unsqueeze(0));
    EXPECT_LT(testing::max_abs_diff(f[b].narrow(0, 0, n), alone[0]), 1e-5) << "row " << b << " of " << n << " tokens";
  }
  EXPECT_GT(padded, 0);
}

// The cache of whole-sequence data keeps each row's length; a run with it gives the on-the-fly loss curve, and a
// cache of the same data's windows is refused (the data fingerprint names the sampling).
TEST(WholeSequences, TheCacheReplaysRowsMasksAndLengths) {
  auto target = testing::tiny_model();
  const TextDataset data = sequence_dataset(7);
  const auto id = identity_for(*target, data, 24);
  const std::string path = fresh("whole_cache.h5");
  FeatureCache::build(path, *target, data, id, 2, at::kFloat);
  const auto cache = FeatureCache::open(path, *target, id);
  for (int64_t s = 0; s < 2; ++s) {
    const CachedBatch b = cache->batch(s);
    EXPECT_TRUE(at::equal(b.windows, data.train_batch(4, 24, 9, s)));
    const RowBatch want = data.train_rows(4, 24, 9, s);
    EXPECT_TRUE(at::equal(b.mask, want.mask));
    EXPECT_TRUE(at::equal(b.lengths, want.lengths));
  }
  const auto fly = train(*target, data, "", 0, "whole_fly");
  const std::string run_cache = fresh("whole_run.h5");
  EXPECT_EQ(train(*target, data, run_cache, 0, "whole_built").train_loss, fly.train_loss);
  EXPECT_EQ(train(*target, data, run_cache, 0, "whole_reused").train_loss, fly.train_loss);
  TextDataset windows = data;
  windows.set_sampling(Sampling::Windows);
  testing::expect_error([&] { train(*target, windows, run_cache, 0, "whole_refused"); }, {run_cache, "data"});
}

// The official recipe counts row i by mask[i]; in a padded row the last real token's row would learn the padding's
// feature, so it must not count: the counted rows are mask[i] for i < length - 1, counted independently here.
TEST(WholeSequences, TheOfficialRuleSkipsTheRowThatWouldReadPadding) {
  auto target = testing::tiny_model();
  const TextDataset data = sequence_dataset(8);
  const RotaryEmbedding rope(target->config(), target->options());
  HeadBatch b;
  b.windows = data.train_batch(6, 24, 1, 0);
  const RowBatch r = data.train_rows(6, 24, 1, 0);
  b.mask = r.mask;
  b.lengths = r.lengths;
  {
    at::NoGradGuard no_grad;
    b.features = training_features(target->config(), target->weights(), rope, b.windows);
  }
  int64_t expected = 0;
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t i = 0; i + 1 < b.lengths[r].item<int64_t>() && i < 24; ++i) expected += b.mask[r][i].item<float>() != 0;
  HeadTrainingModel model(*target, 3);
  model.set_official_recipe(true);
  at::NoGradGuard no_grad;
  EXPECT_EQ(model.evaluate(b).counts.at("accuracy")[0].second, expected);
  HeadBatch unpadded = b;  // without lengths every mask[i] counts: one more row per row ending inside the span
  unpadded.lengths = at::Tensor();
  int64_t ending = 0;
  for (int64_t r = 0; r < 6; ++r) {
    const int64_t n = b.lengths[r].item<int64_t>();
    ending += n < 25 && b.mask[r][n - 1].item<float>() != 0;
  }
  EXPECT_GT(ending, 0);
  EXPECT_EQ(model.evaluate(unpadded).counts.at("accuracy")[0].second, expected + ending);
}

TEST(LossMask, MaskedTokensDoNotChangeTheLoss) {
  // A chat whose last turn is the user's: everything after the answer is masked. Row i of the head counts iff
  // mask[i + 2] and depends on tokens and features up to i + 1 only, so replacing the masked tail's tokens and
  // features (the targets of the uncounted rows) must leave the loss bit-identical; changing one answer token's
  // feature must not.
  auto target = testing::tiny_model(at::kFloat, 2, 7, false, /*vocab=*/300);
  class Bytes : public Tokenizer {
   public:
    std::vector<int32_t> encode(std::string_view text, bool bos) const override {
      std::vector<int32_t> ids;
      if (bos) ids.push_back(1);
      for (char c : text) ids.push_back(static_cast<uint8_t>(c) + 3);
      return ids;
    }
    std::string token_bytes(int32_t, int32_t id) const override { return std::string(1, static_cast<char>(id - 3)); }
    const std::string& piece(int32_t) const override { return p_; }
    int32_t vocab_size() const override { return 259; }
    int32_t bos_id() const override { return 1; }
    int32_t eos_id() const override { return 2; }
    std::string p_;
  } tok;
  const std::vector<ChatMessage> chat = {{"system", ""}, {"user", "where?"}, {"assistant", "here and there"}, {"user", "why so?"}};
  const MaskedSequence s = tokenize_chat(ChatTemplate::VicunaV11, chat, tok);
  const int64_t n = static_cast<int64_t>(s.tokens.size());
  ASSERT_LE(n, 128);
  int64_t last_one = -1;
  for (int64_t i = 0; i < n; ++i)
    if (s.mask[i]) last_one = i;
  ASSERT_GT(last_one, 10);
  ASSERT_LT(last_one, n - 5);
  auto windows = at::empty({1, n}, at::kLong);
  auto mask = at::empty({1, n}, at::kFloat);
  for (int64_t i = 0; i < n; ++i) {
    windows[0][i] = s.tokens[i];
    mask[0][i] = s.mask[i];
  }
  const RotaryEmbedding rope(target->config(), target->options());
  at::Tensor features;
  {
    at::NoGradGuard no_grad;
    features = training_features(target->config(), target->weights(), rope, windows);
  }
  HeadTrainingModel model(*target, 3);
  const double base = model.loss(windows, 11, 0.1, mask, features).loss.item<double>();
  EXPECT_EQ(base, model.loss(windows, 11, 0.1, mask).loss.item<double>());  // features as the target gives them

  auto w2 = windows.clone();
  auto f2 = features.clone();
  const int64_t tail = last_one + 1;
  w2.narrow(1, tail, n - tail).fill_(42);
  f2.narrow(1, tail, n - tail).normal_();
  EXPECT_EQ(model.loss(w2, 11, 0.1, mask, f2).loss.item<double>(), base);

  auto f3 = features.clone();
  f3[0][last_one - 3].normal_();  // an answer token's feature: a counted row's target
  EXPECT_NE(model.loss(windows, 11, 0.1, mask, f3).loss.item<double>(), base);
  // Without the mask the tail counts, and the perturbation shows.
  EXPECT_NE(model.loss(w2, 11, 0.1, {}, f2).loss.item<double>(), model.loss(windows, 11, 0.1, {}, features).loss.item<double>());
}

}  // namespace
}  // namespace draftlab
