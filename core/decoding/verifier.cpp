#include "core/decoding/verifier.h"

#include <cstring>

#include "core/base/error.h"
#include "core/model/host_tensor.h"

namespace draftlab {

at::Tensor residual_after_rejection(const at::Tensor& p, int64_t token, const at::Tensor& q) {
  at::Tensor residual;
  if (!q.defined()) {
    residual = p.clone();
    residual[token] = 0.0f;
  } else {
    residual = (p - q).clamp_min(0.0f);
  }
  const double mass = residual.sum().item<double>();
  // mass 0 means p <= q everywhere, i.e. p == q: then acceptance was certain and this is rounding.
  return mass > 0.0 ? residual / mass : p;
}

Verifier::Verifier(const LlamaModel& target, Sampler& sampler, RejectionUpdate on_rejection,
                   std::vector<int64_t> feature_layers)
    : target_(target), sampler_(sampler), on_rejection_(on_rejection) {
  forward_options_.feature_layers = std::move(feature_layers);
}

VerifyRows Verifier::rows(const KvCache& cache, int64_t root_token, const DraftTree& tree) {
  const int32_t n = tree.size();
  const int32_t m = tree.extra_size();
  VerifyRows rows;
  rows.start = cache.length();
  cache.check_room(n + 1 + m);
  // Row r = 0 is the root, node i is row i + 1, extra row k is row n + 1 + k.
  rows.tokens = tree.tokens_with_root(root_token);
  rows.positions = tree.positions_with_root(rows.start);
  if (n + m > 0) rows.mask = tree.attention_bytes_with_root();
  return rows;
}

std::vector<int32_t> VerifyResult::matched_nodes() const {
  std::vector<int32_t> nodes = accepted_nodes;
  nodes.insert(nodes.end(), beyond_commit_limit.begin(), beyond_commit_limit.end());
  return nodes;
}

void Verifier::set_commit_limit(int32_t nodes) {
  check(nodes >= -1, "verifier: commit limit expected >= -1 (-1 = none), got " + std::to_string(nodes));
  commit_limit_ = nodes;
}

VerifyResult Verifier::verify(KvCache& cache, int64_t root_token, const DraftTree& tree) {
  // One target forward over the root, every node and the extra rows.
  const VerifyRows r = rows(cache, root_token, tree);
  const SequenceRows s = r.sequence(cache);
  const ForwardOutput out = target_.forward(cache, s.tokens, s.positions, s.n, s.ancestor_mask, forward_options_);
  return accept(cache, tree, r, out);
}

VerifyResult Verifier::accept(KvCache& cache, const DraftTree& tree, const VerifyRows& rows,
                              const ForwardOutput& out) {
  const int32_t n = tree.size();
  const int32_t m = tree.extra_size();
  const int64_t start = rows.start;
  const at::Tensor all_logits = out.logits.to(at::kCPU);
  const at::Tensor logits = m > 0 ? all_logits.narrow(0, 0, n + 1) : all_logits;  // the tree's rows

  VerifyResult result;
  result.experts_read = out.experts_read;
  int32_t node = -1;  // current position in the tree (-1 = root)
  auto row_of = [](int32_t i) { return static_cast<int64_t>(i) + 1; };
  auto children_of = [&](int32_t i) -> const std::vector<int32_t>& {
    return i < 0 ? tree.children_of_root() : tree.children(i);
  };

  if (sampler_.params().greedy()) {
    // The target's argmax at a row (read in place, argmax_of as in Sampler::sample); walk down the matching children.
    const at::Tensor host = to_host(logits, at::kFloat);
    const int64_t V = host.size(1);
    while (true) {
      const int64_t want = argmax_of(host.data_ptr<float>() + row_of(node) * V, V);
      int32_t next = -1;
      for (int32_t c : children_of(node))
        if (tree.node(c).token == want) {
          next = c;
          break;
        }
      if (next < 0) {
        result.tokens.push_back(want);
        break;
      }
      result.accepted_nodes.push_back(next);
      result.tokens.push_back(want);
      node = next;
    }
  } else {
    // Multi-round speculative sampling at each node, down the tree.
    while (true) {
      at::Tensor p = sampler_.distribution(logits[row_of(node)]);
      int32_t next = -1;
      for (int32_t c : children_of(node)) {
        const DraftNode& d = tree.node(c);
        // q: what this sibling was drawn from (for a draw without replacement, given the siblings before it).
        const at::Tensor q = tree.draft_distribution(c);
        const float px = p[d.token].item<float>();
        const float qx = q.defined() ? q[d.token].item<float>() : 1.0f;
        if (qx > 0.0f && sampler_.uniform() < static_cast<double>(px) / qx) {
          next = c;
          break;
        }
        // Rejected: the next candidate (or the final sample) must come from the residual norm(max(0, p - q)).
        ++result.rejections;
        p = on_rejection_(p, d.token, q);
      }
      if (next < 0) {
        result.tokens.push_back(sampler_.sample_from(p));
        break;
      }
      result.accepted_nodes.push_back(next);
      result.tokens.push_back(tree.node(next).token);
      node = next;
    }
  }

  const auto path = static_cast<int32_t>(result.accepted_nodes.size());
  if (commit_limit_ >= 0 && path > commit_limit_) {
    // tokens[k] is accepted node k's token for k < path: the kept prefix, then the next accepted token.
    result.beyond_commit_limit.assign(result.accepted_nodes.begin() + commit_limit_, result.accepted_nodes.end());
    result.accepted_nodes.resize(static_cast<size_t>(commit_limit_));
    result.tokens.resize(static_cast<size_t>(commit_limit_) + 1);
  }

  if (m > 0) result.extra_logits = all_logits.narrow(0, n + 1, m);

  // Keep the root and the accepted path in the target cache; drop the rejected branches and the extra rows.
  std::vector<int64_t> keep_rows{start};
  std::vector<int64_t> feature_rows{0};
  for (int32_t a : result.accepted_nodes) {
    keep_rows.push_back(start + row_of(a));
    feature_rows.push_back(row_of(a));
  }
  cache.keep_rows(start, keep_rows);
  if (is_host(out.features, at::kFloat)) {  // row copies, no gather op
    const int64_t d = out.features.size(1);
    result.features = at::empty({static_cast<int64_t>(feature_rows.size()), d}, out.features.options());
    for (size_t k = 0; k < feature_rows.size(); ++k)
      std::memcpy(result.features.data_ptr<float>() + k * d, out.features.data_ptr<float>() + feature_rows[k] * d,
                  static_cast<size_t>(d) * sizeof(float));
  } else {
    result.features = out.features.index_select(0, at::tensor(feature_rows, at::kLong).to(out.features.device()));
  }

  result.records.reserve(n);
  std::vector<bool> accepted(n, false);
  for (int32_t a : result.accepted_nodes) accepted[a] = true;
  for (int32_t i = 0; i < n; ++i) {
    const DraftNode& d = tree.node(i);
    result.records.push_back({d.depth, i + 1, d.sibling_rank, d.confidence, d.value, accepted[i], d.parent + 1});
  }
  return result;
}

}  // namespace draftlab
