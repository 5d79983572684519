#include "core/decoding/draft_tree.h"

#include <algorithm>

#include "core/base/error.h"

namespace draftlab {

int32_t DraftTree::add(int64_t token, int32_t parent, float confidence, int32_t distribution,
                       bool without_replacement) {
  check(parent >= -1 && parent < size(), [&] {
    return "DraftTree::add: parent " + std::to_string(parent) + " must be -1 or an existing node (< " +
           std::to_string(size()) + ")";
  });
  check(distribution >= -1 && distribution < static_cast<int32_t>(distributions_.size()),
        [&] { return "DraftTree::add: distribution index " + std::to_string(distribution) + " was not added"; });
  check(!without_replacement || distribution >= 0,
        "DraftTree::add: a draw without replacement needs the distribution it was drawn from");
  std::vector<int32_t>& siblings = parent < 0 ? root_children_ : children_[parent];
  if (distribution >= 0) {
    // The draw must have been possible: the token has mass in q and, drawn without replacement, no earlier sibling
    // drawn from q took it (then the conditional q gives it mass too). The verifier divides by q at the token.
    const at::Tensor& q = distributions_[distribution];
    bool possible = token >= 0 && token < q.numel() && q.data_ptr<float>()[token] > 0.0f;
    for (int32_t s : siblings) {
      const DraftNode& earlier = nodes_[s];
      possible &= !(without_replacement && earlier.without_replacement && earlier.distribution == distribution &&
                    earlier.token == token);
    }
    if (!possible)
      throw Error("DraftTree::add: token " + std::to_string(token) + " under parent " + std::to_string(parent) +
                  " cannot be drawn" + (without_replacement ? " without replacement" : "") + " from distribution " +
                  std::to_string(distribution) + " (no mass for it: out of range, zero" + (without_replacement ? ", or an earlier sibling's token)" : ")"));
  }
  DraftNode n;
  n.token = token;
  n.parent = parent;
  n.depth = parent < 0 ? 1 : nodes_[parent].depth + 1;
  n.confidence = confidence;
  n.value = (parent < 0 ? 1.0f : nodes_[parent].value) * confidence;
  n.distribution = distribution;
  n.without_replacement = without_replacement;
  n.sibling_rank = static_cast<int32_t>(siblings.size());
  const int32_t index = size();
  siblings.push_back(index);
  nodes_.push_back(n);
  children_.emplace_back();  // may reallocate children_: `siblings` is not used after this
  return index;
}

at::Tensor DraftTree::draft_distribution(int32_t i) const {
  const DraftNode& n = nodes_[i];
  if (n.distribution < 0) return {};
  const at::Tensor& q = distributions_[n.distribution];
  if (!n.without_replacement) return q;
  // Remove the tokens of the earlier siblings drawn without replacement from the same distribution.
  const std::vector<int32_t>& siblings = n.parent < 0 ? root_children_ : children_[n.parent];
  at::Tensor conditional;
  for (int32_t s : siblings) {
    if (s == i) break;
    const DraftNode& earlier = nodes_[s];
    if (earlier.distribution != n.distribution || !earlier.without_replacement) continue;
    if (!conditional.defined()) conditional = q.clone();
    conditional.data_ptr<float>()[earlier.token] = 0.0f;
  }
  if (!conditional.defined()) return q;
  const double mass = conditional.sum().item<double>();
  return mass > 0.0 ? conditional / mass : conditional;
}

int32_t DraftTree::add_extra_row(int64_t token, int32_t depth, std::vector<int32_t> sees_rows,
                                 std::vector<int32_t> sees_nodes) {
  const int32_t index = extra_size();
  // Messages are built only on failure: a lookahead window adds dozens of rows per cycle.
  if (depth < 1) throw Error("DraftTree::add_extra_row: depth " + std::to_string(depth) + " must be >= 1");
  for (int32_t r : sees_rows)
    if (r < 0 || r >= index)
      throw Error("DraftTree::add_extra_row: extra row " + std::to_string(index) + " sees extra row " +
                  std::to_string(r) + ", expected an earlier one (0.." + std::to_string(index - 1) + ")");
  for (int32_t i : sees_nodes)
    if (i < 0 || i >= size())
      throw Error("DraftTree::add_extra_row: extra row " + std::to_string(index) + " sees node " +
                  std::to_string(i) + ", expected an existing node (0.." + std::to_string(size() - 1) + ")");
  extra_rows_.push_back({token, depth, std::move(sees_rows), std::move(sees_nodes)});
  return index;
}

int32_t DraftTree::add_distribution(const at::Tensor& probs) {
  distributions_.push_back(probs.reshape({-1}).to(at::kCPU, at::kFloat).contiguous());
  return static_cast<int32_t>(distributions_.size()) - 1;
}

int32_t DraftTree::max_depth() const {
  int32_t d = 0;
  for (const auto& n : nodes_) d = std::max(d, n.depth);
  return d;
}

std::vector<int64_t> DraftTree::tokens_with_root(int64_t root_token) const {
  std::vector<int64_t> t{root_token};
  t.reserve(1 + nodes_.size() + extra_rows_.size());
  for (const auto& n : nodes_) t.push_back(n.token);
  for (const auto& e : extra_rows_) t.push_back(e.token);
  return t;
}

std::vector<int64_t> DraftTree::positions_with_root(int64_t root_position) const {
  std::vector<int64_t> p{root_position};
  p.reserve(1 + nodes_.size() + extra_rows_.size());
  for (const auto& n : nodes_) p.push_back(root_position + n.depth);
  for (const auto& e : extra_rows_) p.push_back(root_position + e.depth);
  return p;
}

at::Tensor DraftTree::attention_mask_with_root() const {
  const int64_t n = 1 + size() + extra_size();
  std::vector<uint8_t> m = attention_bytes_with_root();
  return at::from_blob(m.data(), {n, n}, at::kByte).to(at::kBool);
}

std::vector<uint8_t> DraftTree::attention_bytes_with_root() const {
  const int64_t first_extra = size() + 1;
  const int64_t n = first_extra + extra_size();
  // Built on the host in a plain buffer: a few dozen nodes, where per-element tensor ops would cost microseconds.
  std::vector<uint8_t> m(static_cast<size_t>(n * n), 0);
  m[0] = 1;
  for (int32_t i = 0; i < size(); ++i) {
    uint8_t* row = &m[static_cast<size_t>((i + 1) * n)];
    row[0] = 1;
    for (int32_t j = i; j >= 0; j = nodes_[j].parent) row[j + 1] = 1;
  }
  for (int32_t k = 0; k < extra_size(); ++k) {
    const ExtraRow& e = extra_rows_[k];
    uint8_t* row = &m[static_cast<size_t>((first_extra + k) * n)];
    row[0] = 1;
    row[first_extra + k] = 1;
    for (int32_t i : e.sees_nodes) row[i + 1] = 1;
    for (int32_t r : e.sees_rows) row[first_extra + r] = 1;
  }
  return m;
}

std::vector<std::vector<int32_t>> DraftTree::leaf_paths() const {
  std::vector<std::vector<int32_t>> paths;
  for (int32_t i = 0; i < size(); ++i) {
    if (!children_[i].empty()) continue;
    std::vector<int32_t> path;
    for (int32_t j = i; j >= 0; j = nodes_[j].parent) path.push_back(j);
    std::reverse(path.begin(), path.end());
    paths.push_back(std::move(path));
  }
  return paths;
}

DraftTree DraftTree::subtree(const std::vector<int32_t>& keep_in) const {
  std::vector<int32_t> keep = keep_in;
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  DraftTree out;
  out.distributions_ = distributions_;
  std::vector<int32_t> new_index(nodes_.size(), -2);
  for (int32_t old : keep) {
    check(old >= 0 && old < size(),
          [&] { return "DraftTree::subtree: node " + std::to_string(old) + " does not exist"; });
    const DraftNode& n = nodes_[old];
    const int32_t parent = n.parent < 0 ? -1 : new_index[n.parent];
    check(parent != -2, [&] {
      return "DraftTree::subtree: node " + std::to_string(old) + " kept without its parent " + std::to_string(n.parent);
    });
    if (n.without_replacement) {
      // Dropping an earlier sibling drawn from the same distribution would change what this node was drawn from.
      const std::vector<int32_t>& siblings = n.parent < 0 ? root_children_ : children_[n.parent];
      for (int32_t s : siblings) {
        if (s == old) break;
        if (nodes_[s].without_replacement && nodes_[s].distribution == n.distribution && new_index[s] < 0)
          throw Error("DraftTree::subtree: node " + std::to_string(old) + " was drawn without replacement after node " +
                      std::to_string(s) + ", which is not kept (its draw distribution would change)");
      }
    }
    new_index[old] = out.add(n.token, parent, n.confidence, n.distribution, n.without_replacement);
  }
  for (ExtraRow e : extra_rows_) {
    for (int32_t& i : e.sees_nodes) {
      if (new_index[i] < 0)
        throw Error("DraftTree::subtree: extra row " + std::to_string(out.extra_size()) + " sees node " +
                    std::to_string(i) + ", which is not kept");
      i = new_index[i];
    }
    out.extra_rows_.push_back(std::move(e));
  }
  return out;
}

}  // namespace draftlab
