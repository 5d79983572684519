// chain: classic speculative sampling (Leviathan et al. 2023; Chen et al. 2023) with a separate small Llama
// draft model that shares the target's vocabulary (options: chain_draft_strategy() in chain_draft.cpp).
#pragma once

#include <memory>

#include "strategies/registry.h"

namespace draftlab {

// For experiments that sweep gamma: reuses an already loaded draft model (shared, never modified).
// Throws Error if the draft's vocabulary differs from the target's or gamma < 1.
std::unique_ptr<DraftStrategy> make_chain_strategy_with_draft(const LlamaModel& target,
                                                              std::shared_ptr<const LlamaModel> draft,
                                                              int64_t gamma);

}  // namespace draftlab
