// eagle-chain: a chain of EAGLE head drafts (the "w/o tree attention" draft of EAGLE section 4.3.1), the
// simplest EAGLE strategy and the baseline the tree strategies are measured against.
//
// Options: eagle_chain_strategy() in eagle_chain.cpp.
// T = 0: each token is the head's argmax (deterministic, distribution -1).
// T > 0: each token is sampled from q = the head's logits after the same temperature/top-k/top-p processing the
// target's distribution gets (Sampler::distribution), and q is recorded with the node, so the verifier accepts with
// min(1, p/q): standard speculative sampling, lossless.
#pragma once

#include "strategies/registry.h"

namespace draftlab {

// eagle-chain (the eagle family).
const StrategyDescriptor& eagle_chain_strategy();

}  // namespace draftlab
