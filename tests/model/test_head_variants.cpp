// EAGLE head input variants (paper Figure 8), reduced draft vocabularies and the head's training diagnostics:
// gradients against central finite differences (float64), what the drafter feeds each variant against the
// training forward, bitwise save/load of every kind, load errors naming file and field, overfitting per variant,
// n-alpha against a naive rollout, the draft vocabulary against hand counts, and the training log's new fields.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/training/draft_vocabulary.h"
#include "core/io/safetensors.h"
#include "strategies/eagle/eagle_head.h"
#include "strategies/eagle/eagle_head_training.h"
#include "core/training/trainer.h"
#include "core/training/training_log.h"
#include "finite_differences.h"
#include "model_fixtures.h"
#include "strategies/eagle_tree/eagle_drafter.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using testing::long_tensor;
using testing::rel_diff;

const std::vector<std::string> kVariants{kEagleInputFeatureShiftedToken, kEagleInputFeatureUnshiftedToken,
                                         kEagleInputFeatureOnly, kEagleInputTokenOnly};

std::string fresh_dir(const std::string& name) {
  const std::string d = testing::temp_dir() + "/head_variants_" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

at::Tensor random_windows(int64_t batch, int64_t length, int64_t vocab, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randint(vocab, {batch, length}, gen, at::TensorOptions().dtype(at::kLong));
}

at::Tensor randn(std::vector<int64_t> shape, uint64_t seed, at::ScalarType dtype = at::kFloat) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::normal(0.0, 1.0, shape, gen, at::TensorOptions().dtype(at::kFloat)).to(dtype);
}

// Every other id of the tiny vocabulary (97): a reduced head with K = 49.
at::Tensor even_ids() { return at::arange(0, 97, 2, at::kLong); }

// Scales a training model's leaves up so that its outputs vary (std 0.02 makes every input look alike).
void liven(HeadTrainingModel& model, uint64_t seed) {
  at::NoGradGuard g;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (const auto& [name, p] : model.parameters()) {
    const double std = name.find("norm") != std::string::npos ? 0.3 : name == "fc_bias" ? 0.1 : 0.3;
    p.add_(at::normal(0.0, std, p.sizes(), gen, at::TensorOptions().dtype(at::kFloat)).to(p.scalar_type()));
  }
}

TEST(HeadVariants, GradientsMatchCentralFiniteDifferencesInFloat64) {
  // A tiny float64 target: every op of the head loss runs in float64 (the loss keeps float64 heads float64), so
  // central differences with h = 1e-6 agree with autograd to ~1e-8 relative; the tolerance 1e-5 leaves room for
  // the rounding of the loss (~1e-16 / h^2 curvature terms) but catches any wrong or missing gradient term.
  ModelConfig c = testing::tiny_config();
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 13;
  c.max_position_embeddings = 16;
  ComputeOptions o;
  o.dtype = at::kDouble;
  LlamaWeights tw = random_llama_weights(c, 3, o);
  tw.embed = tw.embed * 30.0;
  tw.lm_head = tw.lm_head * 30.0;
  LlamaModel target(c, std::move(tw), o);
  const auto windows = random_windows(2, 7, 13, 4);
  for (const std::string& variant : {std::string(kEagleInputFeatureShiftedToken), std::string(kEagleInputTokenOnly)}) {
    for (bool reduced : {false, true}) {
      SCOPED_TRACE(variant + (reduced ? " reduced" : ""));
      HeadTrainingModel model(target, 1, variant, reduced ? long_tensor({0, 2, 3, 7, 11}) : at::Tensor());
      liven(model, 2);
      EXPECT_EQ(testing::expect_gradients_match_central_differences(
                    model.parameters(), [&] { return model.loss(windows, -1).loss; }),
                21);
    }
  }
}

TEST(HeadVariants, TrainingForwardMatchesTheInferenceHeadForEveryVariant) {
  auto target = testing::tiny_model();
  const int64_t T = 9;
  const auto windows = random_windows(1, T + 1, 97, 1);
  const auto features = randn({1, T, 64}, 2);
  for (const auto& variant : kVariants) {
    SCOPED_TRACE(variant);
    HeadTrainingModel model(*target, 3, variant);
    liven(model, 4);
    const auto head = model.to_head();
    EXPECT_EQ(head->input_variant(), variant);
    EXPECT_EQ(head->weights().fc.size(1), variant == kEagleInputFeatureShiftedToken ||
                                                  variant == kEagleInputFeatureUnshiftedToken ? 128 : 64);
    at::NoGradGuard no_grad;
    const auto tokens = model.row_tokens(windows);
    // Row tokens by hand: w_1..w_T, or w_0..w_{T-1} for the unshifted variant.
    EXPECT_TRUE(at::equal(tokens, windows.narrow(1, variant == kEagleInputFeatureUnshiftedToken ? 0 : 1, T)));
    const auto trained = model.forward(tokens, features)[0];
    KvCache cache = head->make_cache(T);
    const auto inference = head->forward(cache, tokens[0], features[0], at::arange(T, at::kLong));
    EXPECT_LT(rel_diff(inference, trained), 1e-5);
    // A variant ignores what it does not read.
    KvCache other = head->make_cache(T);
    const auto changed_tokens = (tokens[0] + 1) % 97;
    const auto changed_features = features[0] * -1.0;
    const auto out_t = head->forward(other, changed_tokens, features[0], at::arange(T, at::kLong));
    other.truncate(0);
    const auto out_f = head->forward(other, tokens[0], changed_features, at::arange(T, at::kLong));
    EXPECT_EQ(at::equal(out_t, inference), variant == kEagleInputFeatureOnly);
    EXPECT_EQ(at::equal(out_f, inference), variant == kEagleInputTokenOnly);
  }
}

// What the drafter feeds the head must be what the head was trained on. A prompt t_0..t_{P-1} with features
// f_0..f_{P-1} and a first token t_P: the root's children come from training row P-1 of the window t_0..t_P, and
// a depth-1 node x's children from row P of the window t_0..t_P, x with f_P replaced by the head's own prediction.
TEST(HeadVariants, DrafterFeedsEachVariantWhatTrainingDoes) {
  auto target = testing::tiny_model();
  const int64_t P = 6;
  const std::vector<int64_t> prompt{3, 14, 15, 92, 65, 35};
  const int64_t first = 89, x = 79;
  const auto f = randn({P, 64}, 5);
  for (const auto& variant : kVariants) {
    for (bool reduced : {false, true}) {
      SCOPED_TRACE(variant + (reduced ? " reduced" : ""));
      HeadTrainingModel model(*target, 6, variant, reduced ? even_ids() : at::Tensor());
      liven(model, 7);
      std::shared_ptr<const EagleHead> head = model.to_head();
      EagleDrafter drafter(head);
      drafter.begin(prompt, f, first);
      DraftTree tree;
      const auto root_logits = drafter.expand(tree, {EagleDrafter::kRoot});
      const int32_t node = tree.add(x, EagleDrafter::kRoot, 0.5f);
      const auto node_logits = drafter.expand(tree, {node});

      at::NoGradGuard no_grad;
      std::vector<int64_t> w = prompt;
      w.push_back(first);
      const auto window = long_tensor(w).unsqueeze(0);  // [1, P + 1]
      const auto rows = model.forward(model.row_tokens(window), f.unsqueeze(0))[0];  // [P, d]
      // Compared over the draft vocabulary (the other columns are -inf in both, and -inf - -inf is nan).
      const auto cols = reduced ? even_ids() : at::arange(97, at::kLong);
      const auto root_ref = head->draft_logits(rows.narrow(0, P - 1, 1));
      EXPECT_LT(rel_diff(root_logits.index_select(1, cols), root_ref), 1e-4);
      w.push_back(x);
      const auto window2 = long_tensor(w).unsqueeze(0);  // [1, P + 2]
      const auto f2 = at::cat({f, rows.narrow(0, P - 1, 1)}, 0).unsqueeze(0);
      const auto rows2 = model.forward(model.row_tokens(window2), f2)[0];
      EXPECT_LT(rel_diff(node_logits.index_select(1, cols), head->draft_logits(rows2.narrow(0, P, 1))), 1e-4);
      EXPECT_GT(rel_diff(node_logits.index_select(1, cols), root_ref), 1e-3) << "x's children should differ from the root's";
      if (reduced) {  // -inf outside the draft vocabulary: odd ids can never be drafted
        EXPECT_TRUE(root_logits.narrow(1, 1, 1).isinf().all().item<bool>());
        EXPECT_EQ(root_logits.argmax(-1).item<int64_t>() % 2, 0);
        EXPECT_NEAR(head->probabilities(rows.narrow(0, P - 1, 1)).sum().item<double>(), 1.0, 1e-5);
      }
    }
  }
}

TEST(HeadVariants, SaveLoadRoundTripIsBitwiseForEveryKind) {
  auto target = testing::tiny_model();
  const auto tokens = long_tensor({5, 17, 3, 96, 40, 2});
  const auto feats = randn({6, 64}, 8);
  const auto pos = at::arange(6, at::kLong);
  for (const auto& variant : kVariants) {
    for (bool reduced : {false, true}) {
      SCOPED_TRACE(variant + (reduced ? " reduced" : ""));
      HeadTrainingModel model(*target, 9, variant, reduced ? even_ids() : at::Tensor());
      liven(model, 10);
      const auto head = model.to_head();
      const std::string dir = fresh_dir("roundtrip");
      head->save(dir);
      const auto loaded = EagleHead::load(dir, *target);
      EXPECT_EQ(loaded->input_variant(), variant);
      EXPECT_EQ(loaded->d2t().defined(), reduced);
      if (reduced) EXPECT_TRUE(at::equal(loaded->d2t(), even_ids()));
      EXPECT_EQ(loaded->draft_vocab_size(), reduced ? 49 : 97);
      const auto& a = head->weights();
      const auto& b = loaded->weights();
      for (auto [x, y] : {std::pair{a.fc, b.fc}, {a.fc_bias, b.fc_bias}, {a.layer.wqkv, b.layer.wqkv},
                          {a.layer.wo, b.layer.wo}, {a.layer.mlp_norm, b.layer.mlp_norm},
                          {a.layer.w_gate_up, b.layer.w_gate_up}, {a.layer.w_down, b.layer.w_down}})
        EXPECT_TRUE(at::equal(x, y));
      KvCache c1 = head->make_cache(8), c2 = loaded->make_cache(8);
      const auto o1 = head->forward(c1, tokens, feats, pos), o2 = loaded->forward(c2, tokens, feats, pos);
      EXPECT_TRUE(at::equal(o1, o2));
      EXPECT_TRUE(at::equal(head->logits(o1), loaded->logits(o2)));

      // The file holds the published keys, plus d2t (int64 target ids) for a reduced head.
      SafetensorsFile file(dir + "/model.safetensors");
      std::vector<std::string> names;
      for (const auto& t : file.tensors()) names.push_back(t.name);
      std::sort(names.begin(), names.end());
      auto expected = EagleHead::checkpoint_keys(true, reduced);
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(names, expected);
      if (reduced) {
        EXPECT_EQ(file.find("d2t")->dtype, DType::I64);
        EXPECT_EQ(file.find("d2t")->shape, std::vector<int64_t>{49});
      }
      const auto config = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
      EXPECT_EQ(config["draftlab_eagle_input"], variant);
      EXPECT_EQ(config.contains("draft_vocab_size"), reduced);
    }
  }
  EXPECT_EQ(EagleHead::checkpoint_keys(true, true).back(), "d2t");
}

// Rewrites a saved head's model.safetensors with `replace` tensors swapped in (same names) or added.
void rewrite(const std::string& dir, const std::vector<std::pair<std::string, at::Tensor>>& replace) {
  SafetensorsFile in(dir + "/model.safetensors");
  std::vector<std::pair<std::string, at::Tensor>> keep;
  for (const auto& t : in.tensors()) {
    bool replaced = false;
    for (const auto& r : replace) replaced = replaced || r.first == t.name;
    if (replaced) continue;
    auto copy = at::empty(t.shape, t.dtype == DType::I64 ? at::kLong : at::kFloat);
    std::memcpy(copy.data_ptr(), t.data, t.nbytes);
    keep.emplace_back(t.name, copy);
  }
  for (const auto& r : replace) keep.push_back(r);
  std::vector<TensorToWrite> entries;
  for (const auto& [name, t] : keep)
    entries.push_back({name, t.scalar_type() == at::kLong ? DType::I64 : DType::F32, t.sizes().vec(), t.data_ptr(),
                       static_cast<size_t>(t.nbytes())});
  write_safetensors(dir + "/model.safetensors", entries);
}

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  edit(j);
  std::ofstream(dir + "/config.json") << j.dump();
}

TEST(HeadVariants, MismatchesAreClearErrorsNamingFileAndField) {
  auto target = testing::tiny_model();
  const std::string st = "/model.safetensors", cj = "/config.json";
  auto saved = [&](const std::string& name, const std::string& variant, at::Tensor d2t) {
    const std::string dir = fresh_dir(name);
    EagleHead::random(*target, 1, variant, d2t)->save(dir);
    return dir;
  };
  auto expect_error = [&](const std::string& dir, const std::vector<std::string>& parts) {
    const std::string msg = error_of([&] { EagleHead::load(dir, *target); });
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  };

  // d2t ids out of range, repeated, of the wrong size or type.
  std::string dir = saved("d2t_range", kEagleInputFeatureShiftedToken, long_tensor({1, 2, 3}));
  rewrite(dir, {{"d2t", long_tensor({1, 2, 97})}});
  expect_error(dir, {dir + st, "d2t", "97", "outside the vocabulary"});
  dir = saved("d2t_repeat", kEagleInputFeatureShiftedToken, long_tensor({1, 2, 3}));
  rewrite(dir, {{"d2t", long_tensor({1, 2, 2})}});
  expect_error(dir, {dir + st, "d2t", "repeated"});
  dir = saved("d2t_size", kEagleInputFeatureShiftedToken, long_tensor({1, 2, 3}));
  rewrite(dir, {{"d2t", long_tensor({1, 2, 3, 4})}});
  expect_error(dir, {dir + st, "d2t", "[3]", "[4]", "draft_vocab_size"});
  dir = saved("d2t_float", kEagleInputFeatureShiftedToken, long_tensor({1, 2, 3}));
  rewrite(dir, {{"d2t", at::ones({3})}});
  expect_error(dir, {dir + st, "d2t", "I64", "F32"});
  // draft_vocab_size larger than the target's vocabulary, and a d2t without draft_vocab_size.
  dir = saved("dvs_big", kEagleInputFeatureShiftedToken, long_tensor({1, 2, 3}));
  edit_config(dir, [](nlohmann::json& j) { j["draft_vocab_size"] = 500; });
  expect_error(dir, {dir + cj, "draft_vocab_size", "97", "500"});
  dir = saved("d2t_no_size", kEagleInputFeatureShiftedToken, long_tensor({1, 2, 3}));
  edit_config(dir, [](nlohmann::json& j) { j.erase("draft_vocab_size"); });
  expect_error(dir, {dir + st, "'d2t'", "draft_vocab_size"});
  // A wrong variant string names the field and the known variants.
  dir = saved("variant", kEagleInputFeatureShiftedToken, {});
  edit_config(dir, [](nlohmann::json& j) { j["draftlab_eagle_input"] = "features_and_tokens"; });
  expect_error(dir, {dir + cj, "draftlab_eagle_input", "features_and_tokens", "token_only"});
  // A variant whose fc width does not match the file: a feature_only config over a two-input head's fc.
  dir = saved("fc_width", kEagleInputFeatureShiftedToken, {});
  edit_config(dir, [](nlohmann::json& j) { j["draftlab_eagle_input"] = "feature_only"; });
  expect_error(dir, {dir + st, "fc.weight", "[64, 64]", "[64, 128]"});
  // Hidden size and vocabulary of another model.
  dir = saved("hidden", kEagleInputTokenOnly, {});
  edit_config(dir, [](nlohmann::json& j) { j["hidden_size"] = 32; });
  expect_error(dir, {dir + cj, "hidden_size", "64", "32"});
  dir = saved("vocab", kEagleInputFeatureOnly, {});
  edit_config(dir, [](nlohmann::json& j) { j["vocab_size"] = 120; });
  expect_error(dir, {dir + cj, "vocab_size", "97", "120"});
  // The constructor and the option parser refuse the same things.
  EXPECT_NE(error_of([&] { EagleHead::random(*target, 0, "both"); }).find("feature_shifted_token"), std::string::npos);
  EXPECT_NE(error_of([&] { EagleHead::random(*target, 0, kEagleInputFeatureOnly, long_tensor({-1})); }).find("-1"),
            std::string::npos);
}

TEST(HeadVariants, ATinyHeadOfEachKindOverfitsATinyBatch) {
  auto target = testing::tiny_model();
  const auto windows = random_windows(2, 13, 97, 11);
  struct Kind {
    std::string variant;
    at::Tensor d2t;
  };
  // The reduced head keeps the batch's own tokens (what --draft-vocab would pick from it) plus a few others.
  const auto kept = most_frequent_tokens({windows}, 97, 30);
  for (const Kind& k : {Kind{kEagleInputFeatureShiftedToken, {}}, Kind{kEagleInputFeatureUnshiftedToken, {}},
                        Kind{kEagleInputFeatureOnly, {}}, Kind{kEagleInputTokenOnly, {}},
                        Kind{kEagleInputFeatureShiftedToken, kept}}) {
    SCOPED_TRACE(k.variant + (k.d2t.defined() ? " reduced" : ""));
    HeadTrainingModel model(*target, 5, k.variant, k.d2t);
    TrainerOptions t;
    t.steps = 150;
    t.lr = 3e-3;
    t.warmup = 10;
    t.weight_decay = 0;
    t.grad_clip = 0.5;
    t.eval_every = 0;
    t.quiet = true;
    Trainer trainer(model.parameters(), t);
    const double first = model.loss(windows, -1).loss.item<double>();
    for (int64_t s = 0; s < t.steps; ++s) trainer.train_step([&] { return model.loss(windows, s).loss; });
    const double last = model.loss(windows, -1).loss.item<double>();
    // Every variant sees enough to memorise 24 rows of one batch (even feature_only: the context identifies
    // the window). Seen here: every kind falls ~14x (to ~0.07, near the soft CE's floor 0.1 * H(p)); a factor 5
    // leaves margin and is far beyond what 150 steps of a head that ignores its input could reach.
    EXPECT_LT(last, first / 5) << "start " << first << ", end " << last;
  }
}

// `steps` AdamW steps on one batch (lr 3e-3): a head between random and memorised, for the n-alpha counts.
void train_a_little(HeadTrainingModel& model, const at::Tensor& windows, int64_t steps) {
  TrainerOptions t;
  t.steps = steps;
  t.lr = 3e-3;
  t.warmup = 5;
  t.eval_every = 0;
  t.quiet = true;
  Trainer trainer(model.parameters(), t);
  for (int64_t s = 0; s < t.steps; ++s) trainer.train_step([&] { return model.loss(windows, s).loss; });
}

TEST(HeadVariants, ChainAcceptanceMatchesANaiveRollout) {
  auto target = testing::tiny_model();
  const int64_t T = 10;
  const auto windows = random_windows(2, T + 1, 97, 21);
  for (const auto& variant : {std::string(kEagleInputFeatureShiftedToken), std::string(kEagleInputFeatureUnshiftedToken)}) {
    SCOPED_TRACE(variant);
    HeadTrainingModel model(*target, 3, variant);
    // Train a little so that agreement is neither 0 nor 1 and the conditional counts say something.
    train_a_little(model, windows, 60);
    at::NoGradGuard no_grad;
    // A mask that drops one position, to exercise the masked path too.
    auto mask = at::ones({2, T + 1}, at::kBool);
    mask[1][5] = false;
    const auto got = model.chain_acceptance(windows, mask);

    // Naive: for every start row i and step n, a fresh cache, the explicit sequence of rows.
    const auto head = model.to_head();
    const auto f = [&] {
      std::vector<at::Tensor> rows;
      for (int64_t b = 0; b < 2; ++b) {
        KvCache cache = target->make_cache(T + 1);
        rows.push_back(target->forward(cache, windows[b], at::arange(T + 1, at::kLong)).features);
      }
      return at::stack(rows);
    }();
    const auto top = at::matmul(f, target->weights().lm_head.t()).argmax(-1);
    const auto tokens = model.row_tokens(windows);
    auto counted = [&](int64_t b, int64_t row) {  // row r predicts w_{r+2}: mask[r+2], the last row mask[T]
      return mask[b][std::min(row + 2, T)].item<bool>();
    };
    int64_t agreed[5] = {}, tried[5] = {};
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t i = 0; i < T; ++i) {
        std::vector<at::Tensor> feats{f[b].narrow(0, 0, i + 1)};
        for (int64_t n = 0; n < 5 && i + n < T; ++n) {
          if (!counted(b, i + n)) break;
          KvCache cache = head->make_cache(T + 5);
          const auto out = head->forward(cache, tokens[b].narrow(0, 0, i + n + 1), at::cat(feats, 0),
                                         at::arange(i + n + 1, at::kLong));
          const auto last = out.narrow(0, i + n, 1);
          ++tried[n];
          if (head->logits(last).argmax(-1).item<int64_t>() != top[b][i + n + 1].item<int64_t>()) break;
          ++agreed[n];
          feats.push_back(last);  // the next step reads the head's own prediction
        }
      }
    }
    for (int n = 0; n < 5; ++n) {
      EXPECT_EQ(got.tried[n], tried[n]) << n << "-alpha";
      EXPECT_EQ(got.agreed[n], agreed[n]) << n << "-alpha";
    }
    EXPECT_GT(tried[1], 0);
    // 0-alpha is the validation top-1 accuracy.
    const auto l = model.loss(windows, -1, 0.1, mask);
    EXPECT_EQ(got.agreed[0], l.correct);
    EXPECT_EQ(got.tried[0], l.count);
  }
}

// The official definition (EAGLE train/main.py getkacc), transcribed literally: per start row, a fresh head forward
// over the rows so far; go on only while the row counts and its window token is the target's argmax; feed the
// head's own argmax token and its own predicted feature; a miss at step k counts a try at every later step.
TEST(HeadVariants, OfficialChainAcceptanceMatchesGetkacc) {
  auto target = testing::tiny_model();
  const int64_t T = 12;
  // Windows that follow the target's greedy choice except at a few planted tokens, so that starts run and stop.
  auto windows = random_windows(2, T + 1, 97, 5);
  {
    at::NoGradGuard no_grad;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t j = 1; j <= T; ++j) {
        if (j == 4 + 3 * b || j == 9) continue;  // planted non-greedy tokens
        KvCache cache = target->make_cache(T + 1);
        const auto out = target->forward(cache, windows[b].narrow(0, 0, j), at::arange(j, at::kLong));
        windows[b][j] = out.logits[j - 1].argmax().item<int64_t>();
      }
  }
  HeadTrainingModel model(*target, 3);
  train_a_little(model, windows, 12);  // partly trained: some chains run, some miss
  at::NoGradGuard no_grad;
  auto mask = at::ones({2, T + 1}, at::kBool);
  mask[0][7] = false;
  const auto got = model.chain_acceptance(windows, mask);

  const auto head = model.to_head();
  int64_t correct[5] = {}, total[5] = {};
  for (int64_t b = 0; b < 2; ++b) {
    KvCache tc = target->make_cache(T + 1);
    const auto f = target->forward(tc, windows[b], at::arange(T + 1, at::kLong)).features;  // f_0..f_T
    const auto top = at::matmul(f, target->weights().lm_head.t()).argmax(-1);              // argmax from f_j
    for (int64_t j = 0; j < T; ++j) {  // start row j: rows 0..j read true pairs (w_{r+1}, f_r)
      std::vector<int64_t> tokens;
      for (int64_t r = 0; r <= j; ++r) tokens.push_back(windows[b][r + 1].item<int64_t>());
      std::vector<at::Tensor> feats{f.narrow(0, 0, j + 1)};
      for (int k = 0; k < 5; ++k) {
        const int64_t row = j + k;
        if (row >= T || !mask[b][std::min(row + 2, T)].item<bool>()) break;          // loss_mask (draftlab's rows)
        if (top[row].item<int64_t>() != windows[b][row + 1].item<int64_t>()) break;  // target_in != tmp_token
        KvCache cache = head->make_cache(T + 5);
        const auto out = head->forward(cache, long_tensor(tokens), at::cat(feats, 0), at::arange(row + 1, at::kLong));
        const auto last = out.narrow(0, row, 1);
        const int64_t token = head->logits(last).argmax(-1).item<int64_t>();
        ++total[k];
        if (token != top[row + 1].item<int64_t>()) {
          for (int kk = k + 1; kk < 5; ++kk) ++total[kk];
          break;
        }
        ++correct[k];
        tokens.push_back(token);  // the head's own token
        feats.push_back(last);
      }
    }
  }
  for (int n = 0; n < 5; ++n) {
    EXPECT_EQ(got.official_tries[n], total[n]) << n;
    EXPECT_EQ(got.official_hits[n], correct[n]) << n;
  }
  for (int n = 0; n < 5; ++n) std::cout << n << ": " << correct[n] << " / " << total[n] << "\n";
  EXPECT_GT(correct[1], 0);              // chains do run past the first step
  EXPECT_LT(correct[0], total[0]);       // and some miss
  EXPECT_GT(total[4], correct[4]);       // misses counted forward
}

// --recipe official: rows counted iff mask[i] (paper: mask[i + 2]), and gradients clipped element by element.
TEST(HeadVariants, OfficialRecipeCountsRowsByMaskIAndClipsByValue) {
  auto target = testing::tiny_model();
  const int64_t T = 8;
  const auto windows = random_windows(3, T + 1, 97, 9);
  auto mask = at::zeros({3, T + 1}, at::kBool);
  mask[0][0] = mask[0][1] = mask[1][5] = mask[2][T] = true;
  HeadTrainingModel paper(*target, 1), official(*target, 1);
  official.set_official_recipe(true);
  // Paper: rows 0..T-2 by mask[2..T], the last row by mask[T] -> row 3 of window 1, rows 6 and 7 of window 2.
  EXPECT_EQ(paper.loss(windows, -1, 0.1, mask).count, 3);
  // Official: row i by mask[i] -> rows 0, 1 of window 0 and row 5 of window 1 (mask[T] has no row).
  EXPECT_EQ(official.loss(windows, -1, 0.1, mask).count, 3);
  mask[0][0] = false;
  EXPECT_EQ(paper.loss(windows, -1, 0.1, mask).count, 3);
  EXPECT_EQ(official.loss(windows, -1, 0.1, mask).count, 2);

  // Clipping: one leaf whose gradient is (3, -0.2, 4); by value 0.5 -> (0.5, -0.2, 0.5), by norm 0.5 -> scaled.
  for (bool by_value : {true, false}) {
    auto w = at::zeros({3}, at::kFloat).requires_grad_(true);
    TrainerOptions t;
    t.steps = 1;
    t.warmup = 0;
    t.grad_clip = 0.5;
    t.clip_by_value = by_value;
    t.quiet = true;
    Trainer trainer({{"w", w}}, t);
    trainer.train_step([&] { return (w * at::tensor({3.0f, -0.2f, 4.0f})).sum(); });
    const auto g = w.grad();
    const auto expected = by_value ? at::tensor({0.5f, -0.2f, 0.5f}) : at::tensor({3.0f, -0.2f, 4.0f}) * (0.5 / std::sqrt(25.04));
    EXPECT_TRUE(g.allclose(expected, 1e-4, 1e-5)) << by_value << ": " << g;
  }
}

TEST(HeadVariants, DraftVocabularyIsTheMostFrequentTokensTiesToTheLowerId) {
  // Counts by hand: 7 x4, 3 x3, 5 x3, 1 x2, 9 x1, 0 x1 -> top 3 = {7, 3, 5}; top 4 adds 1; top 5: 0 beats 9.
  const auto a = long_tensor({7, 3, 7, 5, 1, 9}), b = long_tensor({7, 5, 3, 3, 5, 1, 7, 0}).view({2, 4});
  EXPECT_TRUE(at::equal(most_frequent_tokens({a, b}, 10, 3), long_tensor({3, 5, 7})));
  EXPECT_TRUE(at::equal(most_frequent_tokens({a, b}, 10, 4), long_tensor({1, 3, 5, 7})));
  EXPECT_TRUE(at::equal(most_frequent_tokens({a, b}, 10, 5), long_tensor({0, 1, 3, 5, 7})));
  EXPECT_THROW(most_frequent_tokens({a}, 10, 0), Error);
  EXPECT_THROW(most_frequent_tokens({a}, 10, 11), Error);
}

TEST(HeadVariants, FullDraftVocabularyGivesTheFullVocabularyLoss) {
  // d2t = every id in order: the restricted, renormalised target distribution is the target's own, and the draft
  // LM head is the LM head, so the loss is the unreduced one to rounding.
  auto target = testing::tiny_model();
  const auto windows = random_windows(2, 9, 97, 31);
  HeadTrainingModel full(*target, 4), reduced(*target, 4, kEagleInputFeatureShiftedToken, at::arange(97, at::kLong));
  const auto a = full.loss(windows, 3), b = reduced.loss(windows, 3);
  EXPECT_NEAR(a.loss.item<double>(), b.loss.item<double>(), 1e-6);
  EXPECT_EQ(a.correct, b.correct);
  // A proper subset changes only the soft CE (SmoothL1 is on features).
  HeadTrainingModel half(*target, 4, kEagleInputFeatureShiftedToken, even_ids());
  const auto c = half.loss(windows, 3);
  EXPECT_DOUBLE_EQ(c.smooth_l1, a.smooth_l1);
  EXPECT_NE(c.soft_ce, a.soft_ce);
}

TEST(HeadVariants, TrainEagleHeadLogsAlphaAndWritesTheVariant) {
  auto target = testing::tiny_model();
  std::vector<int32_t> train, val;
  for (int i = 0; i < 3000; ++i) train.push_back((i * 5 + i / 7) % 60);
  for (int i = 0; i < 400; ++i) val.push_back((i * 5 + i / 7) % 60);
  const TextDataset data(std::move(train), std::move(val));
  EagleHeadTrainingOptions o;
  o.batch = 2;
  o.context = 12;
  o.eval_windows = 3;
  o.trainer.steps = 4;
  o.trainer.warmup = 1;
  o.trainer.eval_every = 2;
  o.trainer.quiet = true;
  o.input = kEagleInputFeatureUnshiftedToken;
  o.draft_vocab = 20;
  o.out_dir = fresh_dir("train_run");
  const auto r = train_eagle_head(*target, o, data);
  ASSERT_NE(r.curves.metric("alpha"), nullptr);
  ASSERT_NE(r.curves.metric("accuracy"), nullptr);
  const auto& alpha = *r.curves.metric("alpha");
  const auto& accuracy = *r.curves.metric("accuracy");
  ASSERT_EQ(alpha.size(), r.curves.eval_loss.size());
  ASSERT_EQ(accuracy.size(), r.curves.eval_loss.size());
  for (size_t p = 0; p < alpha.size(); ++p) {
    ASSERT_EQ(alpha[p].size(), 5u);
    EXPECT_DOUBLE_EQ(alpha[p][0], accuracy[p][0]);
  }
  const auto log = read_training_log(o.out_dir + "/training_log.h5");
  EXPECT_EQ(log.eval_metrics, r.curves.eval_metrics);
  EXPECT_EQ(log.attributes.at("family"), "eagle");
  const auto head = EagleHead::load(o.out_dir, *target);
  EXPECT_EQ(head->input_variant(), kEagleInputFeatureUnshiftedToken);
  ASSERT_TRUE(head->d2t().defined());
  EXPECT_EQ(head->d2t().size(0), 20);
  EXPECT_LT(head->d2t().max().item<int64_t>(), 60);  // only ids the data contains

  // Resumed halfway, the same curves including accuracy and alpha; another variant's state is refused.
  EagleHeadTrainingOptions split = o;
  split.out_dir = fresh_dir("train_split");
  split.trainer.stop_at = 2;
  train_eagle_head(*target, split, data);
  split.trainer.stop_at = 0;
  split.resume = true;
  const auto resumed = train_eagle_head(*target, split, data);
  EXPECT_EQ(resumed.curves.eval_metrics, r.curves.eval_metrics);
  EXPECT_EQ(resumed.curves.train_loss.back(), r.curves.train_loss.back());
  split.input = kEagleInputFeatureOnly;
  const std::string msg = error_of([&] { train_eagle_head(*target, split, data); });
  EXPECT_NE(msg.find("metadata input"), std::string::npos) << msg;
  EXPECT_NE(msg.find("training_state.safetensors"), std::string::npos) << msg;

  // A log without the head's fields (the language model's) still reads, with them empty.
  TrainingCurves plain;
  plain.train_step = {1};
  plain.train_loss = {2.0};
  plain.learning_rate = {1e-3};
  write_training_log(o.out_dir + "/plain.h5", plain);
  const auto back = read_training_log(o.out_dir + "/plain.h5");
  EXPECT_TRUE(back.eval_metrics.empty());
  EXPECT_EQ(back.train_loss, plain.train_loss);
}

}  // namespace
}  // namespace draftlab
