// DraftTree - the candidate continuations a strategy proposes for one verification.
//
// The root is implicit: the last accepted token, whose target forward has not run yet. Nodes are stored flat,
// parents before children (add() enforces it), so the flat order is a valid verifier input order and the
// accepted path is increasing in it. A chain is a tree with one child per node; an empty tree is vanilla decoding.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace draftlab {

struct DraftNode {
  int64_t token = 0;
  int32_t parent = -1;       // flat index of the parent node; -1 = child of the root
  int32_t depth = 1;         // 1 for children of the root
  int32_t sibling_rank = 0;  // order among the parent's children (0 = added first = tried first by the verifier)
  float confidence = 1.0f;   // draft probability of this token given its path (1 for model-free drafts, whose
                             // results-file rows say NaN: StrategyDescriptor::has_confidence)
  float value = 1.0f;        // product of confidences from the root down to this node (EAGLE-2 section 4.1)
  // Which DraftTree::distributions entry this token was *sampled* from, or -1 when it was chosen
  // deterministically (argmax / top-k / lookup): the verifier then treats the draft as a point mass.
  int32_t distribution = -1;
};

class DraftTree {
 public:
  // Appends a node and returns its flat index. parent must be -1 or an existing node. Throws Error otherwise.
  int32_t add(int64_t token, int32_t parent, float confidence = 1.0f, int32_t distribution = -1);

  // Stores a draft distribution q (float32 [vocab], any device; moved to CPU) and returns its index.
  int32_t add_distribution(const at::Tensor& probs);

  const std::vector<DraftNode>& nodes() const { return nodes_; }
  const DraftNode& node(int32_t i) const { return nodes_[i]; }
  const at::Tensor& distribution(int32_t i) const { return distributions_[i]; }
  int32_t size() const { return static_cast<int32_t>(nodes_.size()); }
  bool empty() const { return nodes_.empty(); }
  int32_t max_depth() const;

  // Children of each node in sibling order; children_of_root() for depth-1 nodes.
  const std::vector<int32_t>& children_of_root() const { return root_children_; }
  const std::vector<int32_t>& children(int32_t i) const { return children_[i]; }

  // Verifier input with the root prepended as row 0 (node i is row i + 1):
  std::vector<int64_t> tokens_with_root(int64_t root_token) const;
  std::vector<int64_t> positions_with_root(int64_t root_position) const;  // root_position + depth
  at::Tensor ancestor_mask_with_root() const;                             // [n+1, n+1] bool, diagonal true

  // Root-to-leaf paths as flat node indices (one per leaf), for inspection and tests.
  std::vector<std::vector<int32_t>> leaf_paths() const;

  // Keeps only the given nodes (which must include every kept node's parent), preserving relative order:
  // used by EAGLE-2 reranking. Returns the new tree; distributions are carried over.
  DraftTree subtree(const std::vector<int32_t>& keep) const;

 private:
  std::vector<DraftNode> nodes_;
  std::vector<std::vector<int32_t>> children_;
  std::vector<int32_t> root_children_;
  std::vector<at::Tensor> distributions_;
};

}  // namespace draftlab
