// Oracle draft lengths ("Speculative Decoding: Performance or Illusion?", arXiv 2601.11580) from a run's oracle
// table (results_schema.h: with --oracle every question turn is decoded once more committing one token per cycle,
// so each answer position is a cycle start and `matched` is what a draft from there gets accepted).
//   - The oracle draft length at a position is its matched count m: the draft an oracle would ask for there
//     (every drafted token accepted, no row verified in vain; m = 0: do not draft, one plain step).
//   - The walk: a cycle at position 0 commits its m + 1 tokens, the next starts where it ended, and so on. For a
//     drafter whose draft depends on the committed text alone (prompt lookup, a draft model) these are the run's
//     own cycles; a drafter with memory (a trie of its own earlier drafts, a pool of n-grams) can differ. An oracle
//     drafting exactly m tokens at each step has the walk's cycles, at the cost of m nodes instead of the tree.
//   - The best of several proposers per step: the walk over the position-wise maximum of their m.
#pragma once

#include <cstdint>
#include <vector>

#include "core/results/results_file.h"

namespace draftlab::analysis {

// Per question row of the run, its matched lengths by position (empty for a row without oracle rows).
std::vector<std::vector<int32_t>> oracle_matched(const RunRecord& run);

struct OracleWalk {
  int64_t positions = 0;                // oracle rows walked over
  double mean_matched = 0;              // mean m over every position
  double drafting_share = 0;            // share of positions with m >= 1
  std::vector<int32_t> accept_lengths;  // m + 1 of each walk cycle, questions in order
  std::vector<int32_t> matched;         // its m
  std::vector<int64_t> cached;          // tokens in the cache when it starts: the prompt + its position
  double tau() const;                   // mean accept length over the walk's cycles (NaN: none)
};

// The walk over `matched` (per question row of `run`, as oracle_matched gives it); prompt lengths from the run.
OracleWalk oracle_walk(const RunRecord& run, const std::vector<std::vector<int32_t>>& matched);

// Position-wise maximum of the runs' matched lengths (the best proposer at each step). Throws Error naming the runs
// when their questions (ids, turns, prompt lengths) or oracle positions differ: they must have decoded the same
// text, as every lossless method at T = 0 does.
std::vector<std::vector<int32_t>> best_of_matched(const std::vector<const RunRecord*>& runs);

}  // namespace draftlab::analysis
