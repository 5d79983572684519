// suffix: SuffixDecoding (Oliaro et al., arXiv 2411.04975; ArcticInference, vLLM `method: suffix`). No model: the
// draft is a tree of continuations of the sequence's longest recent pattern, weighted by how often each followed it,
// looked up in two suffix tries: one of this request's prompt and output, one of earlier requests' outputs.
//
// A suffix trie truncated at depth D (max_tree_depth) holds every substring of at most D tokens of its text as a
// path from the root; a node's count is how many positions of the text start that substring, so
// count(child) / count(node) estimates how likely the child's token follows the node's pattern. Appending a token
// extends the substrings ending at the old end by one: O(D) per token.
//
// A proposal: the longest suffix of the sequence (at most D tokens) that the trie holds with a continuation is the
// pattern, of length L; the tree grows best-first from its node by path probability (the product of the estimates
// along the path), stopping below min_token_prob, at max_spec_factor * L nodes (the paper: speculate more after a
// longer match), at depth D, and within the request's budget. The request's trie and the global one each give a
// tree; the one with the larger expected accepted length (the sum of its path probabilities) drafts. Drafts are
// deterministic (point masses for the verifier), so any tree is verified exactly at every temperature.
//
// Decided here where the spec leaves it open: the pattern is the longest match (ArcticInference also scores shorter
// ones); the request's own last occurrence counts in count(node), as in ArcticInference, so a pattern seen once
// before has probability 1/2; the global trie keeps at most the last max_cached_requests outputs (rebuilt when it
// drops some) and learns an output when the next request begins; a request whose prompt equals an earlier request's
// does not see that request's output (dropped, the trie rebuilt): a benchmark's warm-up and repeats would otherwise
// draft the very answer the run is timing.
#include <algorithm>
#include <deque>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "strategies/registry.h"

namespace draftlab {

namespace {

class SuffixTrie {
 public:
  explicit SuffixTrie(int32_t depth) : depth_(depth) { clear(); }

  void clear() {
    nodes_.assign(1, Node{});
    open_.clear();
  }

  // Appends a token to the text; a new text (the next cached output) starts with end_text() first.
  void append(int64_t token) {
    // open_ runs from depth 1 up, every node shorter than depth_: the extended ones run from 2 up, so only the
    // last may reach depth_ and close.
    std::deque<int32_t> next{extend(0, token)};  // the substring that starts at the new token
    for (int32_t node : open_) next.push_back(extend(node, token));
    if (nodes_[next.back()].depth >= depth_) next.pop_back();
    open_ = std::move(next);
  }
  // Ends the current text: nothing appended later extends its substrings.
  void end_text() { open_.clear(); }

  // The node of the longest suffix of `sequence` (at most depth - 1 tokens) the trie holds with a continuation,
  // and its length; {0, 0} when none.
  std::pair<int32_t, int32_t> match(const std::vector<int64_t>& sequence) const {
    const auto n = static_cast<int32_t>(sequence.size());
    for (int32_t length = std::min(n, depth_ - 1); length >= 1; --length) {
      int32_t node = 0;
      for (int32_t i = n - length; i < n && node >= 0; ++i) node = child(node, sequence[i]);
      if (node > 0 && !nodes_[node].children.empty()) return {node, length};
    }
    return {0, 0};
  }

  struct Node {
    int64_t count = 0;
    int32_t depth = 0;
    int64_t token = -1;                                 // the token of the edge into it
    std::vector<std::pair<int64_t, int32_t>> children;  // (token, node), few per node
  };
  const Node& node(int32_t i) const { return nodes_[i]; }

 private:
  int32_t child(int32_t node, int64_t token) const {
    for (const auto& [t, c] : nodes_[node].children)
      if (t == token) return c;
    return -1;
  }
  int32_t extend(int32_t node, int64_t token) {
    int32_t c = child(node, token);
    if (c < 0) {
      c = static_cast<int32_t>(nodes_.size());
      const int32_t depth = nodes_[node].depth + 1;
      nodes_[node].children.emplace_back(token, c);
      nodes_.push_back(Node{0, depth, token, {}});
    }
    ++nodes_[c].count;
    return c;
  }

  int32_t depth_;
  std::vector<Node> nodes_;
  std::deque<int32_t> open_;  // the nodes of the substrings ending at the text's end, shorter than depth_
};

struct Options {
  int32_t max_tree_depth;
  double max_spec_factor;
  double min_token_prob;
  int32_t max_cached_requests;
};

class SuffixStrategy : public SequenceStrategy {
 public:
  explicit SuffixStrategy(Options o) : o_(o), request_(o.max_tree_depth), global_(o.max_tree_depth) {}

  std::string name() const override { return "suffix"; }

  void begin(const std::vector<int64_t>& prompt, const at::Tensor&, int64_t) override {
    remember_output();
    forget_prompt(prompt);
    request_.clear();
    indexed_ = 0;
    prompt_ = prompt;
    last_sequence_.clear();
  }

  DraftTree propose(const DraftRequest& request) override {
    const std::vector<int64_t>& seq = request.sequence;
    if (seq.size() < indexed_) {  // not the sequence begin() announced: index it afresh
      request_.clear();
      indexed_ = 0;
    }
    for (; indexed_ < seq.size(); ++indexed_) request_.append(seq[indexed_]);
    last_sequence_ = seq;
    const int32_t budget = std::min(request.max_nodes, request.tokens_wanted);
    if (budget <= 0) return {};
    Candidate best = grow(request_, seq, budget);
    if (!cached_.empty()) {
      Candidate other = grow(global_, seq, budget);
      if (other.score > best.score) best = std::move(other);
    }
    return std::move(best.tree);
  }

  void observe(const VerifyResult&) override {}  // the next request's sequence carries the accepted tokens

 private:
  struct Candidate {
    DraftTree tree;
    double score = 0;  // expected accepted tokens: the sum of the nodes' path probabilities
  };

  Candidate grow(const SuffixTrie& trie, const std::vector<int64_t>& seq, int32_t budget) const {
    Candidate out;
    const auto [start, length] = trie.match(seq);
    if (length == 0) return out;
    const auto nodes = std::min<int64_t>(budget, static_cast<int64_t>(o_.max_spec_factor * length));
    struct Open {
      double probability;
      int32_t trie_node, parent;  // parent: a node of out.tree, -1 = the root
      bool operator<(const Open& other) const { return probability < other.probability; }
    };
    std::priority_queue<Open> open;
    auto push_children = [&](int32_t node, double probability, int32_t parent) {
      const SuffixTrie::Node& n = trie.node(node);  // a node at the trie's depth has no children: depth bounded
      for (const auto& [token, c] : n.children)
        open.push({probability * static_cast<double>(trie.node(c).count) / static_cast<double>(n.count), c, parent});
    };
    push_children(start, 1.0, -1);
    while (!open.empty() && out.tree.size() < nodes) {
      const Open next = open.top();
      open.pop();
      if (next.probability < o_.min_token_prob) break;  // the rest are less likely still
      const int32_t added = out.tree.add(trie.node(next.trie_node).token, next.parent);
      out.score += next.probability;
      push_children(next.trie_node, next.probability, added);
    }
    return out;
  }

  struct CachedRequest {
    std::vector<int64_t> prompt, output;
  };

  // The finished request's output joins the global trie (its last max_cached_requests outputs). Past the limit the
  // oldest tenth goes at once, so the trie is rebuilt once per tenth of the cache, not after every request.
  void remember_output() {
    if (last_sequence_.size() <= prompt_.size()) return;
    cached_.push_back({prompt_, std::vector<int64_t>(last_sequence_.begin() + static_cast<std::ptrdiff_t>(prompt_.size()),
                                                    last_sequence_.end())});
    if (static_cast<int32_t>(cached_.size()) > o_.max_cached_requests) {
      const auto cap = static_cast<size_t>(o_.max_cached_requests);
      const size_t keep = cap == 0 ? 0 : std::max<size_t>(1, cap * 9 / 10);
      cached_.erase(cached_.begin(), cached_.end() - static_cast<std::ptrdiff_t>(keep));
      rebuild_global();
      return;
    }
    for (int64_t t : cached_.back().output) global_.append(t);
    global_.end_text();
  }
  // Drops the outputs of earlier requests with this very prompt.
  void forget_prompt(const std::vector<int64_t>& prompt) {
    const size_t before = cached_.size();
    cached_.erase(std::remove_if(cached_.begin(), cached_.end(), [&](const CachedRequest& c) { return c.prompt == prompt; }),
                  cached_.end());
    if (cached_.size() != before) rebuild_global();
  }
  void rebuild_global() {
    global_.clear();
    for (const CachedRequest& c : cached_) {
      for (int64_t t : c.output) global_.append(t);
      global_.end_text();
    }
  }

  Options o_;
  SuffixTrie request_, global_;
  size_t indexed_ = 0;
  std::vector<int64_t> prompt_, last_sequence_;
  std::deque<CachedRequest> cached_;
};

}  // namespace

const StrategyDescriptor& suffix_strategy() {
  static const StrategyDescriptor d = [] {
    StrategyDescriptor d;
    d.name = "suffix";
    d.summary = "SuffixDecoding, no model: a tree of what followed the longest recent pattern, from suffix tries of "
                "this request and of earlier outputs";
    d.needs = StrategyNeeds::Nothing;
    d.shape = DraftShape::DynamicTree;
    d.has_confidence = false;  // frequencies, not a model's probabilities
    d.options = {integer_option("max_tree_depth", 24, 2, 256, "longest pattern and deepest draft (trie depth)"),
                 number_option("max_spec_factor", 1.0, 0.01, 1024, "nodes per cycle at most: this times the match length"),
                 number_option("min_token_prob", 0.1, 0, 1, "a node's path probability (frequency estimate) at least"),
                 integer_option("max_cached_requests", 10000, 0, 1000000,
                                "earlier outputs the global trie keeps (0: this request's trie only)")};
    // The paper's settings; a wider variant (longer trees from short matches, rarer continuations).
    d.test_variants = {{"suffix", {}}, {"suffix_wide", {"max_spec_factor=4", "min_token_prob=0.02", "max_tree_depth=8"}}};
    d.make = [](const StrategyContext&, const StrategyOptions& o) -> std::unique_ptr<DraftStrategy> {
      return std::make_unique<SuffixStrategy>(Options{static_cast<int32_t>(o.get_int("max_tree_depth")),
                                                      o.get_double("max_spec_factor"), o.get_double("min_token_prob"),
                                                      static_cast<int32_t>(o.get_int("max_cached_requests"))});
    };
    return d;
  }();
  return d;
}

const DraftFamily& suffix_family() {
  static const DraftFamily f{"suffix", {&suffix_strategy()}};
  return f;
}

}  // namespace draftlab
