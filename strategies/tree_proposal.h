// TreeProposal - a draft tree handed in from outside the library (a Python drafter's propose(): draftlab.Tree's
// tokens, parents, optional confidences and per-node draft distributions q), checked before any of it reaches a
// DraftTree. Torch-free, so the check can be fuzzed alone (tests/fuzz/tree_proposal_fuzz.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace draftlab {

struct TreeProposal {
  std::vector<int64_t> tokens;
  std::vector<int64_t> parents;      // flat index of each node's parent, -1 under the root
  std::vector<double> confidences;   // empty: 1 for every node
  size_t distributions = 0;          // entries of q (0: none given; else one per node, None for a chosen token)
};

// Throws Error, prefixed by `where` and naming the node, unless: one parent (and confidence, and q entry when
// given) per node; at most max_nodes nodes; every token in 0..vocab-1; every confidence in 0..1; every parent -1
// or an earlier node (the flat order DraftTree and the verifier rely on).
void check_tree_proposal(const TreeProposal& proposal, int64_t vocab, int64_t max_nodes, const std::string& where);

// A node's draft distribution q: `size` probabilities, expected vocab of them, finite, non-negative, summing to 1
// within 1e-3, and giving the node's own token mass (a token drawn from q cannot have probability 0). Throws Error
// prefixed by `where` otherwise.
void check_draft_distribution(const float* probs, int64_t size, int64_t vocab, int64_t token,
                              const std::string& where);

}  // namespace draftlab
