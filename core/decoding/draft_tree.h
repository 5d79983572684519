// DraftTree - the candidate continuations a strategy proposes for one verification.
//
// The root is implicit: the last accepted token, whose target forward has not run yet. Nodes are stored flat,
// parents before children (add() enforces it), so the flat order is a valid verifier input order and the
// accepted path is increasing in it. A chain is a tree with one child per node; an empty tree is vanilla decoding.
//
// Extra rows: besides its nodes, a draft may ask the verification forward to score rows that can never be
// accepted, for the strategy's own use (lookahead decoding's Jacobi window; any parallel or Jacobi draft):
// add_extra_row(token, depth, sees_rows, sees_nodes). An extra row sits at position root + depth and attends to
// the committed cache, the root, itself, and exactly the earlier extra rows and tree nodes it lists (nothing is
// implied: for a row to continue a sequence, list every row of that sequence). Tree rows never see extra rows,
// so the tree's logits, its acceptance and the output are what they would be without them. The verifier puts
// the extra rows after the tree rows in the same target forward, returns their logits (VerifyResult::
// extra_logits) and drops them from the KV cache.
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
  // Sampled without replacement: drawn from `distribution` with the tokens of the earlier siblings drawn from it
  // (also without replacement) removed, renormalised. EAGLE-1's sampled tree at T > 0: siblings are distinct, and
  // the verifier divides by this conditional q (DraftTree::draft_distribution), as recursive rejection sampling
  // without replacement requires. Its earlier such siblings must stay in the tree (subtree() refuses otherwise).
  bool without_replacement = false;
};

// A row scored alongside the tree but never accepted (see above).
struct ExtraRow {
  int64_t token = 0;
  int32_t depth = 1;                // position = root position + depth
  std::vector<int32_t> sees_rows;   // earlier extra rows it attends to
  std::vector<int32_t> sees_nodes;  // tree nodes it attends to
};

class DraftTree {
 public:
  // Appends a node and returns its flat index. parent must be -1 or an existing node; a sampled token (distribution
  // >= 0) must have mass in it, and without_replacement once its earlier siblings are removed. Throws Error otherwise.
  int32_t add(int64_t token, int32_t parent, float confidence = 1.0f, int32_t distribution = -1,
              bool without_replacement = false);

  // Stores a draft distribution q (float32 [vocab], any device; moved to CPU) and returns its index.
  int32_t add_distribution(const at::Tensor& probs);

  // Appends an extra row and returns its index among the extra rows. depth >= 1; sees_rows must name earlier extra
  // rows, sees_nodes nodes added before this call. Throws Error otherwise.
  int32_t add_extra_row(int64_t token, int32_t depth, std::vector<int32_t> sees_rows,
                        std::vector<int32_t> sees_nodes = {});

  const std::vector<DraftNode>& nodes() const { return nodes_; }
  const DraftNode& node(int32_t i) const { return nodes_[i]; }
  const at::Tensor& distribution(int32_t i) const { return distributions_[i]; }
  // The distribution node i was drawn from, as the verifier divides by it: undefined for a deterministic draft (a
  // point mass), distributions_[d] for an independent draw, and for a draw without replacement that distribution
  // with its earlier siblings' tokens zeroed and renormalised.
  at::Tensor draft_distribution(int32_t i) const;
  int32_t size() const { return static_cast<int32_t>(nodes_.size()); }
  bool empty() const { return nodes_.empty(); }  // no nodes (extra rows may still be there)
  const std::vector<ExtraRow>& extra_rows() const { return extra_rows_; }
  int32_t extra_size() const { return static_cast<int32_t>(extra_rows_.size()); }
  int32_t max_depth() const;

  // Children of each node in sibling order; children_of_root() for depth-1 nodes.
  const std::vector<int32_t>& children_of_root() const { return root_children_; }
  const std::vector<int32_t>& children(int32_t i) const { return children_[i]; }

  // Verifier input with the root prepended as row 0 (node i is row i + 1), then the extra rows (extra row k is
  // row size() + 1 + k):
  std::vector<int64_t> tokens_with_root(int64_t root_token) const;
  std::vector<int64_t> positions_with_root(int64_t root_position) const;  // root_position + depth
  // [r, r] bool, r = 1 + size() + extra_size(), diagonal true: a node sees the root and its ancestors, an extra
  // row the root and what it lists.
  at::Tensor attention_mask_with_root() const;
  // The same as r * r bytes (1 = visible), row-major: what the verifier hands the target.
  std::vector<uint8_t> attention_bytes_with_root() const;

  // Root-to-leaf paths as flat node indices (one per leaf), for inspection and tests.
  std::vector<std::vector<int32_t>> leaf_paths() const;

  // Keeps only the given nodes (which must include every kept node's parent), preserving relative order:
  // used by EAGLE-2 reranking. Returns the new tree; distributions and extra rows are carried over (an extra row
  // that sees a dropped node is an Error).
  DraftTree subtree(const std::vector<int32_t>& keep) const;

 private:
  std::vector<DraftNode> nodes_;
  std::vector<std::vector<int32_t>> children_;
  std::vector<int32_t> root_children_;
  std::vector<at::Tensor> distributions_;
  std::vector<ExtraRow> extra_rows_;
};

}  // namespace draftlab
