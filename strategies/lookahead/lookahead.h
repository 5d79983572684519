// lookahead: lookahead decoding (Fu, Bailis, Stoica, Zhang 2024, "Break the Sequential Dependency of LLM Inference
// Using Lookahead Decoding"; hao-ai-lab/LookaheadDecoding, lade/decoding.py). No draft model: the target itself
// runs Jacobi iterations on a window of future positions, and the n-grams those iterations produce are the drafts.
//
// Every cycle, one target forward verifies the root plus two branches:
//   * the lookahead branch (extra rows, draft_tree.h): a 2D window of N-1 levels by W columns. Cell (l, c) holds a
//     guess for position root + l + c; cell (0, 0) is the root itself, so level 0 has W-1 tokens (columns 1..W-1)
//     and levels 1..N-2 have W. Cell (l, c) attends to level 0 up to column c and to its own column in levels
//     1..l: the sequence root, level0[1..c], level1[c], ..., level_l[c], at consecutive positions. Its argmax is a
//     Jacobi update: a guess for position root + l + c + 1.
//   * the verification branch (tree nodes): the pool's n-grams that start with the root, at most G, each a chain
//     of N-1 tokens, merged into a trie (newest first), deterministic drafts (point masses, no confidence).
// After the forward, the deepest level's argmaxes (one per column) complete one N-gram per column, [cell (0, c),
// cell (1, c), ..., cell (N-2, c), argmax]; each goes into the pool under its first token. The window then moves
// one position, whatever was accepted (level l <- level l+1, level0 <- level1 without its first cell, newest
// level <- the argmaxes), as the official code does: after a longer acceptance the window is stale and the
// iteration simply carries on from there.
//
// Start of a sequence, as the official code: level 0 gets W+N-3 tokens drawn from the prompt (a generator of the
// strategy's own with a fixed seed, so runs repeat), the other levels fill during N-2 warm-up steps (each step
// drops every level's first token and adds the argmaxes of the deepest level but the first as a new level); only
// a full window harvests n-grams. With prefill_step the first warm-up step runs inside the prefill forward (level 0
// after the prompt, causal, dropped from the cache: DraftStrategy::prefill_rows), as the official first forward
// does; otherwise it takes the first cycle.
//
// The window reads argmaxes at every temperature (the official code asserts it too): this never touches the
// decoding sampler, so at T > 0 the output keeps the target's distribution exactly. Verification is the verifier's
// (greedy walk, or multi-round speculative sampling over the trie's point masses). With ngram_bonus (default) it
// also takes the verifier's token after a fully matched n-gram; the official loop stops there (at most N - 1 tokens
// a step), which ngram_bonus=false reproduces by cutting each guess before its last token. Also unlike the official code, the
// guesses are tried newest first (it goes oldest first; at T = 0 the order changes nothing), and at T > 0 end-of-
// sequence tokens in the window are kept (its filter_window swaps them for prompt tokens).
//
// Options (defaults in lookahead_strategy()): window W, ngram N, guesses G (n-grams kept per first token, and so
// verified per cycle), prompt_pool (also pool every n-gram of the committed sequence, prompt included, before each
// proposal; the official POOL_FROM_PROMPT, off by default there too, pools the prompt's and then the last N
// committed tokens per step), ngram_bonus, prefill_step, and setting=official (W 15, N 5, G 15, ngram_bonus=false,
// prefill_step=true: the official MT-bench run; options given explicitly override it).
//
// The defaults (W 2, N 3, G 1) are sized for a CPU, where every verified row costs: the GPU settings of the
// official MT-bench script for Llama-2-7B are W 15, N 5, G 15 (applications/run_mtbench.sh). On ts-target
// (README's three prompts, 64 new tokens, T = 0, native path, float16 weights, 1 thread; two runs on a shared VM)
// W 2 N 3 G 1 ran at 0.82-0.97x vanilla (tau 1.31), G 2 0.77-0.92x (1.32), W 4 N 4 G 4 0.35-0.43x (1.45),
// W 15 N 5 G 15 0.11-0.14x (1.79), the defaults with prompt_pool 0.85-1.02x (1.42). Drafting took under 1% of
// the time: lookahead is verification-bound here (a forward of 8 rows costs about 2x one row).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/decoding/draft_tree.h"
#include "strategies/registry.h"

namespace draftlab {

// N-grams keyed by their first token; each key keeps its newest `per_key` continuations (N-1 tokens each), as the
// official token map with a guess-set size: adding an n-gram already there makes it the newest, a new one is
// appended and the oldest dropped when the key is full.
class NGramPool {
 public:
  NGramPool(int32_t ngram, int32_t per_key);

  // Records key followed by continuation[0 .. N-2].
  void add(int64_t key, const int64_t* continuation);
  // The continuations under key, oldest first, N-1 tokens each back to back; empty when none.
  const std::vector<int64_t>& continuations(int64_t key) const;
  int32_t continuation_length() const { return length_; }
  size_t keys() const { return map_.size(); }
  void clear() { map_.clear(); }

 private:
  int32_t length_, per_key_;
  std::unordered_map<int64_t, std::vector<int64_t>> map_;
};

// The lookahead branch's window (see the top of this file): levels[0] holds columns 1.., levels[l >= 1] columns 0...
class LookaheadWindow {
 public:
  LookaheadWindow(int32_t window, int32_t ngram);

  // A new sequence: level 0 = `first_level` (W+N-3 tokens), no other level yet.
  void reset(std::vector<int64_t> first_level);
  int32_t filled_levels() const { return static_cast<int32_t>(levels_.size()); }
  bool full() const { return filled_levels() == ngram_ - 1; }
  const std::vector<int64_t>& level(int32_t l) const { return levels_[l]; }

  // Extra rows add_rows adds: level 0 then level 1, ..., each in column order.
  int32_t rows() const;
  void add_rows(DraftTree& tree) const;

  // One step, from the argmax of every row add_rows added (in its order) under `root`: when full, each column's
  // n-gram goes into pool; then the window moves one position (or, warming up, gains a level).
  void advance(int64_t root, const int64_t* argmax, NGramPool& pool);

 private:
  int32_t width_, ngram_;
  std::vector<std::vector<int64_t>> levels_;
  std::vector<int64_t> continuation_;  // scratch: one n-gram's tail
};

// Adds pool's continuations of `root` to tree as a trie of chains under the root, newest first (sibling order),
// each cut to max_depth tokens, while the tree has fewer than max_nodes nodes. Point masses, confidence 1.
void add_guess_trie(DraftTree& tree, const NGramPool& pool, int64_t root, int32_t max_depth, int32_t max_nodes);

}  // namespace draftlab
