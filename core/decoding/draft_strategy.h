// DraftStrategy - the small lifecycle every drafter implements (in the spirit of llama.cpp's common/speculative):
//
//   begin(prompt, prompt_features, first_token)   once per sequence, after the target's prefill
//   propose(request) -> DraftTree                 each cycle: continuations of request.sequence
//   observe(result)                               each cycle: what the verifier accepted
//
// A new strategy is one file in strategies/ plus one line in strategies/registry.h. Strategies never touch
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
  // Sequences whose trees share this verification forward (batch_decoder.h): a budget chosen from the forward's
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

  // Proposes a draft tree under request.sequence.back(). May be empty.
  virtual DraftTree propose(const DraftRequest& request) = 0;

  // The verification of the last proposal: accepted path, the next root (result.tokens.back()), the target's
  // features of the old root and accepted nodes, and the logits of the proposal's extra rows.
  virtual void observe(const VerifyResult& result) = 0;

  // Batched decoding (batch_decoder.h) calls these on one strategy of the batch with every sequence's strategy
  // (`peers`: made by the same descriptor with the same options, this one among them) and its request / result.
  // The defaults call propose() / observe() on each peer. A strategy whose drafting runs a model overrides them to
  // share its forwards across the batch; each peer's tree must stay the one propose() would give it.
  virtual std::vector<DraftTree> propose_batch(const std::vector<DraftStrategy*>& peers,
                                               const std::vector<DraftRequest>& requests) {
    std::vector<DraftTree> trees;
    for (size_t i = 0; i < peers.size(); ++i) trees.push_back(peers[i]->propose(requests[i]));
    return trees;
  }
  virtual void observe_batch(const std::vector<DraftStrategy*>& peers, const std::vector<const VerifyResult*>& results) {
    for (size_t i = 0; i < peers.size(); ++i) peers[i]->observe(*results[i]);
  }
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
class NoDraftStrategy : public DraftStrategy {
 public:
  std::string name() const override { return "vanilla"; }
  void begin(const std::vector<int64_t>&, const at::Tensor&, int64_t) override {}
  DraftTree propose(const DraftRequest&) override { return {}; }
  void observe(const VerifyResult&) override {}
};

// The peers as strategies of type S, or empty when one is not (propose_batch / observe_batch overrides fall back
// to the defaults then).
template <class S>
std::vector<S*> peers_of_type(const std::vector<DraftStrategy*>& peers) {
  std::vector<S*> out;
  for (DraftStrategy* p : peers) {
    auto* s = dynamic_cast<S*>(p);
    if (s == nullptr) return {};
    out.push_back(s);
  }
  return out;
}

}  // namespace draftlab
