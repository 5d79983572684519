// HeadFamily - a family of draft heads (EAGLE-1/2, EAGLE-3, Medusa, Hydra), declared once next to its code, as
// strategies are (strategies/strategy_descriptor.h): its name, its title, and how a head folder of it is
// recognised from config.json. A driver given several --head folders hands each strategy the one of its family
// (StrategyDescriptor::head_family); results files record "head:NAME"; train-head --kind takes the name.
//
// Adding a family: define <file>_family() in the family's own source file and add X(<file>) below.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

// Every family, one line each. Recognition tries them in this order; the family without a `recognises` rule
// (eagle: a plain Hugging Face Llama config of one layer, as the published EAGLE-1/2 heads have) takes the rest.
#define DRAFTLAB_HEAD_FAMILIES(X) \
  X(eagle_head)                   \
  X(eagle3_head)                  \
  X(medusa_heads)                 \
  X(hydra_heads)

namespace draftlab {

class FeatureHead;
class LlamaModel;

struct HeadFamily {
  std::string name;     // "eagle", "eagle3", "medusa", "hydra"
  std::string title;    // "EAGLE head", ... (README's strategies table, messages)
  std::string summary;  // one line: what the head is
  // True when a folder's config.json (a JSON object) is of this family; empty for the fallback family.
  std::function<bool(const nlohmann::json& config)> recognises;
  // Families the EAGLE strategies draft with (feature_head.h): loads a trained folder of this family for a target
  // (throws Error naming the file and field). Empty for the others (Medusa, Hydra).
  std::function<std::shared_ptr<const FeatureHead>(const std::string& path, const LlamaModel& target)> load_feature_head =
      {};
};

#define DRAFTLAB_DECLARE_HEAD_FAMILY(file) const HeadFamily& file##_family();
DRAFTLAB_HEAD_FAMILIES(DRAFTLAB_DECLARE_HEAD_FAMILY)
#undef DRAFTLAB_DECLARE_HEAD_FAMILY

const std::vector<const HeadFamily*>& head_family_table();

// Throws Error for an unknown name, listing the known ones.
const HeadFamily& find_head_family(const std::string& name);
// "eagle, eagle3, medusa, hydra" (messages).
std::string head_family_names();

// The family of a head folder, or of a weights file with config.json beside it. A path without a readable
// config.json counts as the fallback family (whose loader then names what is missing). Throws Error naming
// config.json when it exists but is not a JSON object.
const HeadFamily& head_family_of(const std::string& path);

}  // namespace draftlab
