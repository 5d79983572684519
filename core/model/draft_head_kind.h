// DraftHeadKind - which family a draft-head folder belongs to, read off its config.json, so that a driver given
// several --head folders hands each strategy the one it can load (StrategyDescriptor::head_kind).
//
//   medusa   config.json has "medusa_num_heads" (FasterDecoding/Medusa's MedusaConfig; MedusaHeads::load)
//   hydra    config.json has "hydra_num_heads" (zankner/Hydra's HydraConfig)
//   eagle    anything else: a Hugging Face Llama config of one layer (EagleHead::load)
// A path without a readable config.json counts as eagle, the kind drivers assumed before there were others: the
// EAGLE loader then names what is missing.
#pragma once

#include <string>

namespace draftlab {

enum class DraftHeadKind { Eagle, Medusa, Hydra };

// "eagle", "medusa", "hydra" (what train-head --kind takes and results files record).
const char* draft_head_kind_name(DraftHeadKind kind);
// "EAGLE head", "Medusa heads", "Hydra heads" (README's strategies table, messages).
const char* draft_head_kind_title(DraftHeadKind kind);
// The inverse of draft_head_kind_name. Throws Error listing the names.
DraftHeadKind parse_draft_head_kind(const std::string& name);

// The kind of a head folder, or of a weights file with config.json beside it. Throws Error naming config.json when
// it exists but is not a JSON object.
DraftHeadKind draft_head_kind(const std::string& path);

}  // namespace draftlab
