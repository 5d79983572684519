// DraftStrategy - the small lifecycle every drafter implements (in the spirit of llama.cpp's common/speculative):
//
//   begin(prompt, prompt_features, first_token)   once per sequence, after the target's prefill
//   propose_batch(peers, requests) -> DraftTrees  each cycle: continuations of each request.sequence
//   observe_batch(peers, results)                 each cycle: what the verifier accepted
//
// Batch-first: the decoder drives B sequences (B = 1 included) through these two calls. A strategy that drafts one
// sequence at a time derives from SequenceStrategy and writes propose(request) / observe(result) instead.
// A new family is one folder in strategies/ plus one line in strategies/registry.h. Strategies never touch
// the target's KV cache; the verifier owns it. Whatever a strategy drafts, the output stays lossless.
//
// Besides the tree's nodes (candidates the verifier may accept), a proposal may carry extra rows
// (DraftTree::add_extra_row): tokens at chosen positions, each attending to the chosen earlier extra rows or tree
// nodes, scored by the target in the same verification forward and handed back as VerifyResult::extra_logits.
// They are never accepted, never stay in the cache and are invisible to the tree's rows, so they cannot change
// the output. This is how a strategy gets target predictions it does not commit to: lookahead decoding's Jacobi
// window (strategies/lookahead/lookahead.cpp), or any parallel / Jacobi draft. Read their logits without the decoding
// sampler's random stream (argmax, or a generator of the strategy's own): drawing from request.sampler outside
// a tree's recorded draft distributions would change which tokens T > 0 decoding samples.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/decoding/draft_tree.h"
#include "core/decoding/verifier.h"
#include "core/model/sampler.h"

namespace draftlab {

struct DraftRequest {
  // Prompt plus everything generated so far. sequence.back() is the root: accepted, but not yet run through the
  // target (its forward happens in the verification this draft is for).
  const std::vector<int64_t>& sequence;
  // Most rows the draft may add, nodes plus extra rows (what is left of the context after the root). Drafting
  // more is an error. An extra row's depth within max_nodes keeps its position inside the context.
  int32_t max_nodes;
  // Most tokens still wanted (max_new_tokens left): nodes deeper than this would be thrown away.
  int32_t tokens_wanted;
  // Decoding's sampler: its params (T > 0 lets a strategy sample its draft and record q) and random stream.
  Sampler& sampler;
  // Sequences whose trees share this verification forward (speculative_decoder.h): a budget chosen from the forward's
  // cost (total_tokens=auto) pays for the other sequences' rows too, so it shrinks as the batch grows.
  int32_t batch_size = 1;
};

class DraftStrategy {
 public:
  virtual ~DraftStrategy() = default;

  virtual std::string name() const = 0;

  // Which target features begin() and observe() receive: empty (the default) for the final normed hidden state
  // [., d]; else the residual stream after these target layers, side by side [., k d] (EAGLE-3's low, middle and
  // high layers; ForwardOptions::feature_layers). The decoders ask once per sequence.
  virtual std::vector<int64_t> target_feature_layers() const { return {}; }

  // A new sequence. prompt_features [P, d] are the target's features (target_feature_layers()) of the prompt
  // tokens; first_token is the token decoded from the prompt, i.e. the first root.
  virtual void begin(const std::vector<int64_t>& prompt, const at::Tensor& prompt_features, int64_t first_token) = 0;

  // Tokens to run after the prompt in the prefill forward, a causal chain at positions P, P + 1, ... (at most
  // max_rows; called before begin()). The prompt's rows never see them, so the first token is unchanged; the cache
  // drops them afterwards, and their logits [k, vocab] come to observe_prefill_rows() right after begin(). Lookahead
  // decoding runs its first Jacobi step there, as the official code does. Read them without the decoding sampler.
  virtual std::vector<int64_t> prefill_rows(const std::vector<int64_t>& /*prompt*/, int64_t /*max_rows*/) { return {}; }
  virtual void observe_prefill_rows(const at::Tensor& /*logits*/) {}

  // The decoder's two calls each cycle, batch-first (one sequence is a batch of one): on one strategy of the batch,
  // with every sequence's strategy (`peers`: made by the same descriptor with the same options, this one among them)
  // and its request / result, in order.
  // propose_batch: a draft tree under each request.sequence.back() (may be empty). A strategy whose drafting runs a
  // model shares its forwards across the batch; each peer's tree must stay the one it would draft alone.
  // observe_batch: the verification of each peer's last proposal: accepted path, the next root
  // (result.tokens.back()), the target's features of the old root and accepted nodes, the extra rows' logits.
  // Strategies that draft each sequence on its own derive from SequenceStrategy below instead.
  virtual std::vector<DraftTree> propose_batch(const std::vector<DraftStrategy*>& peers,
                                               const std::vector<DraftRequest>& requests) = 0;
  virtual void observe_batch(const std::vector<DraftStrategy*>& peers,
                             const std::vector<const VerifyResult*>& results) = 0;
};

// The peers as strategies of type S; Error naming the strategy when one is not (a batch's strategies come from one
// descriptor, so this is a caller's mistake).
template <class S>
std::vector<S*> peers_as(const std::vector<DraftStrategy*>& peers) {
  std::vector<S*> out;
  out.reserve(peers.size());
  for (DraftStrategy* p : peers) {
    auto* s = dynamic_cast<S*>(p);
    if (s == nullptr)
      throw Error("strategy " + (p ? p->name() : std::string("(null)")) + ": a batch mixes strategies of different " +
                  "kinds (every sequence of a batch needs a strategy made by the same descriptor)");
    out.push_back(s);
  }
  return out;
}

// One sequence's draft or result, as a batch of one (tests, tools that drive a strategy by hand).
inline DraftTree propose_one(DraftStrategy& strategy, const DraftRequest& request) {
  return std::move(strategy.propose_batch({&strategy}, {request})[0]);
}
inline void observe_one(DraftStrategy& strategy, const VerifyResult& result) {
  strategy.observe_batch({&strategy}, {&result});
}

// The one-at-a-time adapter: a strategy that drafts each sequence on its own (no model forward to share: vanilla,
// chain, prompt lookup, lookahead, Medusa / Hydra, Python drafters) writes propose() and observe() for one
// sequence; a batch calls them on each peer in turn.
class SequenceStrategy : public DraftStrategy {
 public:
  virtual DraftTree propose(const DraftRequest& request) = 0;
  virtual void observe(const VerifyResult& result) = 0;

  std::vector<DraftTree> propose_batch(const std::vector<DraftStrategy*>& peers,
                                       const std::vector<DraftRequest>& requests) final {
    std::vector<DraftTree> trees;
    trees.reserve(peers.size());
    if (alone(peers)) {  // a batch of one: no casts (the per-token path of single-sequence decoding)
      trees.push_back(propose(requests[0]));
      return trees;
    }
    const auto sequences = peers_as<SequenceStrategy>(peers);
    for (size_t i = 0; i < sequences.size(); ++i) trees.push_back(sequences[i]->propose(requests[i]));
    return trees;
  }
  void observe_batch(const std::vector<DraftStrategy*>& peers,
                     const std::vector<const VerifyResult*>& results) final {
    if (alone(peers)) return observe(*results[0]);
    const auto sequences = peers_as<SequenceStrategy>(peers);
    for (size_t i = 0; i < sequences.size(); ++i) sequences[i]->observe(*results[i]);
  }

 private:
  bool alone(const std::vector<DraftStrategy*>& peers) const { return peers.size() == 1 && peers[0] == this; }
};

// The prefill forward's tokens: the prompt, then strategy.prefill_rows(prompt, room). Throws Error when the strategy
// asks for more rows than the room it was given.
inline std::vector<int64_t> prompt_with_prefill_rows(DraftStrategy& strategy, const std::vector<int64_t>& prompt,
                                                     int64_t room) {
  const std::vector<int64_t> rows = strategy.prefill_rows(prompt, room);
  if (static_cast<int64_t>(rows.size()) > room)
    throw Error("strategy " + strategy.name() + " asked for " + std::to_string(rows.size()) +
                " prefill rows, but only " + std::to_string(room) + " fit the context");
  std::vector<int64_t> chain = prompt;
  chain.insert(chain.end(), rows.begin(), rows.end());
  return chain;
}

// Drafts nothing: plain decoding through the speculative loop (the registry's vanilla, and batched plain decoding).
class NoDraftStrategy : public SequenceStrategy {
 public:
  std::string name() const override { return "vanilla"; }
  void begin(const std::vector<int64_t>&, const at::Tensor&, int64_t) override {}
  DraftTree propose(const DraftRequest&) override { return {}; }
  void observe(const VerifyResult&) override {}
};

}  // namespace draftlab
