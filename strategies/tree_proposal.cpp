#include "strategies/tree_proposal.h"

#include <cmath>

#include "core/base/error.h"

namespace draftlab {

void check_tree_proposal(const TreeProposal& p, int64_t vocab, int64_t max_nodes, const std::string& where) {
  const size_t n = p.tokens.size();
  check(p.parents.size() == n, where + ": parents has " + std::to_string(p.parents.size()) + " entries, tokens " +
                                   std::to_string(n) + ": expected one parent per node");
  check(p.confidences.empty() || p.confidences.size() == n,
        where + ": confidences has " + std::to_string(p.confidences.size()) + " entries: expected " +
            std::to_string(n));
  check(p.distributions == 0 || p.distributions == n,
        where + ": q has " + std::to_string(p.distributions) + " entries: expected one per node (None for a chosen " +
            "token)");
  check(static_cast<int64_t>(n) <= max_nodes, where + ": " + std::to_string(n) +
                                                  " nodes: expected at most request['max_nodes'] = " +
                                                  std::to_string(max_nodes));
  for (size_t i = 0; i < n; ++i) {
    const std::string node = where + ": node " + std::to_string(i);
    check(p.tokens[i] >= 0 && p.tokens[i] < vocab,
          node + ": token " + std::to_string(p.tokens[i]) + ": expected 0.." + std::to_string(vocab - 1));
    const double confidence = p.confidences.empty() ? 1.0 : p.confidences[i];
    // Written so that NaN fails too.
    check(confidence >= 0 && confidence <= 1, node + ": confidence " + std::to_string(confidence) + ": expected 0..1");
    check(p.parents[i] >= -1 && p.parents[i] < static_cast<int64_t>(i),
          node + ": parent " + std::to_string(p.parents[i]) + ": expected -1 (the root) or an earlier node (0.." +
              std::to_string(static_cast<int64_t>(i) - 1) + ")");
  }
}

void check_draft_distribution(const float* probs, int64_t size, int64_t vocab, int64_t token,
                              const std::string& where) {
  check(size == vocab, where + ": q: expected a vector of " + std::to_string(vocab) + " probabilities, got " +
                           std::to_string(size));
  double sum = 0;
  bool finite = true;
  for (int64_t v = 0; v < size; ++v) {
    finite = finite && std::isfinite(probs[v]) && probs[v] >= 0;
    sum += probs[v];
  }
  check(finite && std::abs(sum - 1) <= 1e-3,
        where + ": q: expected non-negative probabilities summing to 1, got a sum of " + std::to_string(sum));
  check(token >= 0 && token < size && probs[token] > 0,
        where + ": q gives the node's token " + std::to_string(token) + " no mass: a token drawn from q must have some");
}

}  // namespace draftlab
