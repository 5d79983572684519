// KvCache bookkeeping against a hand-filled cache, and forward/generation input errors.
#include <gtest/gtest.h>

#include "core/base/error.h"
#include "core/decoding/vanilla_decoder.h"
#include "model_fixtures.h"

using namespace draftlab;
using namespace draftlab::testing;

namespace {

// Fills rows [length, length + n) of every layer with the row index as value, then advances.
void append_marked(KvCache& cache, int64_t n) {
  const int64_t start = cache.length();
  for (int64_t l = 0; l < cache.num_layers(); ++l) {
    const int64_t heads = cache.keys(l, 1).size(0), head_dim = cache.keys(l, 1).size(2);
    auto rows = at::arange(start, start + n, at::kFloat).view({1, n, 1}).expand({heads, n, head_dim}).contiguous();
    cache.write(l, start, rows + 1000 * l, -rows);
  }
  cache.advance_to(start + n);
}

TEST(KvCache, KeepRowsPacksTheChosenRowsInOrder) {
  KvCache cache(3, 2, 3, 16, ComputeOptions{});
  append_marked(cache, 4);   // committed prefix rows 0..3
  append_marked(cache, 6);   // a "tree" at rows 4..9
  cache.keep_rows(4, {5, 7, 8});
  ASSERT_EQ(cache.length(), 7);
  for (int64_t l = 0; l < 3; ++l) {
    auto k = cache.keys(l, 7).select(0, 1).select(1, 2);  // head 1, element 2 of every row
    auto v = cache.values(l, 7).select(0, 0).select(1, 0);
    std::vector<float> expect_k{0, 1, 2, 3, 5, 7, 8};
    for (int64_t r = 0; r < 7; ++r) {
      EXPECT_EQ(k[r].item<float>(), expect_k[r] + 1000 * l) << "layer " << l << " row " << r;
      EXPECT_EQ(v[r].item<float>(), -expect_k[r]);
    }
  }
  // Keeping nothing drops the whole tree; keeping the first rows is a no-op move.
  append_marked(cache, 3);
  cache.keep_rows(7, {});
  EXPECT_EQ(cache.length(), 7);
}

TEST(KvCache, BadRowsAndOverflowAreErrors) {
  KvCache cache(1, 1, 2, 8, ComputeOptions{});
  append_marked(cache, 5);
  EXPECT_THROW(cache.keep_rows(2, {3, 3}), Error);  // not increasing
  EXPECT_THROW(cache.keep_rows(2, {1}), Error);     // before start
  EXPECT_THROW(cache.keep_rows(2, {5}), Error);     // past length
  EXPECT_THROW(cache.check_room(4), Error);
  EXPECT_NO_THROW(cache.check_room(3));
  EXPECT_THROW(cache.truncate(6), Error);
  cache.truncate(1);
  EXPECT_EQ(cache.length(), 1);
}

TEST(ForwardErrors, BadTokensPositionsMasksAndFullCache) {
  auto model = tiny_model();
  KvCache cache = model->make_cache(8);
  EXPECT_THROW(model->forward_chain(cache, {97}), Error);   // vocab is 97
  EXPECT_THROW(model->forward_chain(cache, {-1}), Error);
  EXPECT_THROW(model->forward(cache, long_tensor({1}), long_tensor({128})), Error);  // context is 128
  auto no_diag = at::zeros({2, 2}, at::kBool);
  EXPECT_THROW(model->forward(cache, long_tensor({1, 2}), long_tensor({0, 1}), no_diag), Error);
  EXPECT_THROW(model->forward(cache, long_tensor({1, 2}), long_tensor({0, 1}), at::ones({3, 3}, at::kBool)), Error);
  EXPECT_EQ(cache.length(), 0) << "failed forwards leave the cache unchanged";
  model->forward_chain(cache, {1, 2, 3, 4, 5, 6});
  EXPECT_THROW(model->forward_chain(cache, {1, 2, 3}), Error);
  EXPECT_EQ(cache.length(), 6);
}

TEST(GenerationErrors, EmptyAndOverlongPrompts) {
  auto model = tiny_model();  // context 128
  GenerationConfig gen;
  EXPECT_THROW(generate_vanilla(*model, {}, gen), Error);
  std::vector<int64_t> too_long(129, 5);
  try {
    generate_vanilla(*model, too_long, gen);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("129 tokens"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("128"), std::string::npos) << e.what();
  }
  // Exactly the context: one token comes out, then generation stops at the context.
  std::vector<int64_t> full(128, 5);
  gen.max_new_tokens = 10;
  auto r = generate_vanilla(*model, full, gen);
  EXPECT_EQ(r.tokens.size(), 1u);
  EXPECT_EQ(r.stop_reason, "context");
}

}  // namespace
