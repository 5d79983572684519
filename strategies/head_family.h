// HeadFamily - a family of trainable draft heads (EAGLE-1/2, EAGLE-3, Medusa, Hydra), declared once in its folder
// (strategies/<family>/<family>_family.cpp; the folder's DraftFamily in registry.h points at it): how a head folder
// of it is recognised and loaded, the random heads tests draft with, its train-head flags and trainer, and the tree
// strategy that drafts with it. Nothing outside the folder dispatches on its name: train-head, the drivers, the
// EAGLE drafter and the results files go through this descriptor.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/gguf.h"
#include "core/training/head_training.h"
#include "strategies/option_spec.h"
#include "strategies/strategy_options.h"

namespace draftlab {

class FeatureHead;
class LlamaModel;
class TextDataset;
class Tokenizer;

// What train-head hands a family's trainer once the target and the data have loaded.
struct HeadTrainingRun {
  const LlamaModel& target;
  const TextDataset& data;
  HeadTrainingOptions common;  // the flags every family shares (trainer, data, checkpoints, data parallel)
  StrategyOptions options;     // the family's own flags (HeadFamily::training_options), checked, defaults filled
  // Whether a shared flag ("lr", "warmup", ...) was given on the command line: a recipe keeps those.
  std::function<bool(const std::string& flag)> given;
};

struct HeadFamily {
  std::string name;     // "eagle", "eagle3", "medusa", "hydra": train-head --kind, results files' "head:NAME"
  std::string title;    // "EAGLE head", ... (README's strategies table, messages)
  std::string summary;  // one line: what the head is
  // True when a folder's config.json (a JSON object) is of this family; empty for the fallback family (eagle: a
  // plain Hugging Face Llama config of one layer, as the published EAGLE-1/2 heads have).
  std::function<bool(const nlohmann::json& config)> recognises;
  // The strategy that drafts a dynamic or static tree with these heads: drivers hand it a --head of this family,
  // and messages name it for a head given to a strategy of another family.
  std::string tree_strategy;

  // Families the EAGLE tree grower drafts with (feature_head.h), empty for the others: loads a trained folder for a
  // target (throws Error naming the file and field), and makes a random head for tests from the EAGLE strategies'
  // options (strategies/eagle_tree/eagle_drafter.h: head_seed, draft_vocab, and random_head_options).
  std::function<std::shared_ptr<const FeatureHead>(const std::string& path, const LlamaModel& target)> load_feature_head;
  std::function<std::shared_ptr<const FeatureHead>(const LlamaModel& target, const StrategyOptions& options)>
      random_feature_head;
  std::vector<OptionSpec> random_head_options;  // what else shapes its random heads

  // train-head --kind NAME: the family's own flags (key = the flag without "--"; families that share a flag
  // declare it alike), checked before the target loads; rules across them (optional, throws Error naming the
  // flags); and the trainer, which writes the run's folder (head_training.h).
  std::vector<OptionSpec> training_options;
  std::function<void(const StrategyOptions& options)> check_training_options;
  std::function<HeadTrainingResult(const HeadTrainingRun& run)> train;

  // export-gguf --head: writes a head folder for `target` as the GGUF llama.cpp's speculative decoding reads (its
  // matrices as `type`, the target's tokenizer); empty for families llama.cpp has no architecture for.
  std::function<void(const std::string& head_path, const LlamaModel& target, const Tokenizer& tokenizer,
                     const std::string& out, GgmlType type, const std::string& name)>
      export_gguf;

  const OptionSpec* training_option(const std::string& key) const;
};

// Every family of the registry (registry.h) that has heads, in its order.
const std::vector<const HeadFamily*>& head_family_table();

// Throws Error for an unknown name, listing the known ones.
const HeadFamily& find_head_family(const std::string& name);
// "eagle, medusa, hydra, eagle3" (messages).
std::string head_family_names();

// The family of a head folder, or of a weights file with config.json beside it. A path without a readable
// config.json counts as the fallback family (whose loader then names what is missing). Throws Error naming
// config.json when it exists but is not a JSON object.
const HeadFamily& head_family_of(const std::string& path);

// The option head=PATH of a strategy that drafts with `family`, checked before any model loads: Error when PATH does
// not exist or holds heads of another family (naming the strategy that runs those).
void check_head_path(const HeadFamily& family, const std::string& path);

}  // namespace draftlab
