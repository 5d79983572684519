// The eagle family (EAGLE-1/2): its head (eagle_head.h), its trainer (eagle_head_training.h), and the strategies that
// draft with it through the EAGLE tree grower (strategies/eagle_tree/): static-tree (EAGLE-1), eagle-chain, eagle2.
#include "strategies/eagle/eagle_family.h"

#include "strategies/eagle/eagle_head.h"
#include "strategies/eagle/eagle_head_training.h"
#include "strategies/eagle_tree/eagle2.h"
#include "strategies/eagle_tree/eagle_chain.h"
#include "strategies/eagle_tree/static_tree.h"
#include "strategies/registry.h"

#include <ATen/CPUGeneratorImpl.h>

namespace draftlab {

namespace {

// A random head for tests: draft_vocab=K keeps K random distinct target ids drawn from head_seed + 1.
std::shared_ptr<const FeatureHead> random_head(const LlamaModel& target, const StrategyOptions& o) {
  const auto seed = static_cast<uint64_t>(o.get_int("head_seed"));
  const int64_t draft_vocab = o.get_int("draft_vocab");
  at::Tensor d2t;
  if (draft_vocab != 0) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
    const int64_t V = target.config().vocab_size;
    d2t = std::get<0>(at::randperm(V, gen, at::TensorOptions().dtype(at::kLong)).narrow(0, 0, draft_vocab).sort());
  }
  return EagleHead::random(target, seed, o.get_string("head_input"), d2t);
}

HeadTrainingResult train(const HeadTrainingRun& run) {
  EagleHeadTrainingOptions o;
  static_cast<HeadTrainingOptions&>(o) = run.common;
  o.input = run.options.get_string("input");
  o.cls_weight = run.options.get_double("cls-weight");
  o.recipe = run.options.get_string("recipe");
  o.draft_vocab = run.options.get_int("draft-vocab");
  return train_eagle_head(run.target, o, run.data);
}

}  // namespace

const HeadFamily& eagle_heads() {
  static const HeadFamily f = [] {
    HeadFamily f;
    f.name = "eagle";
    f.title = "EAGLE head";
    f.summary = "EAGLE-1/2: fc(2d -> d) over [embedding; feature] and one decoder layer, predicting the target's next "
                "feature for the target's LM head";
    f.recognises = {};  // the fallback: a plain one-layer Llama config, as the published heads have
    f.tree_strategy = "eagle2";
    f.load_feature_head = [](const std::string& path, const LlamaModel& target) {
      return std::shared_ptr<const FeatureHead>(EagleHead::load(path, target));
    };
    f.random_feature_head = random_head;
    f.random_head_options = {choice_option("head_input", eagle_input_variants(), "the random head's input variant (EAGLE Figure 8)")};
    f.training_options = {
        choice_option("input", eagle_input_variants(),
                      "the head's input (EAGLE Figure 8): feature_shifted_token (EAGLE), feature_unshifted_token, "
                      "feature_only, token_only"),
        number_option("cls-weight", 0.1, 0, 1000, "weight of the soft cross-entropy"),
        choice_option("recipe", {"paper", "official"},
                      "official: the official trainer's (train/main.py) input noise scaled by 512 / context, row i "
                      "iff mask[i], each gradient clipped by value (docs/fidelity.md)"),
        integer_option("draft-vocab", 0, 0, 100000000,
                       "K > 0: draft over the K most frequent training tokens only (a cheaper LM head); 0 = the full "
                       "vocabulary")};
    f.train = train;
    return f;
  }();
  return f;
}

const DraftFamily& eagle_family() {
  static const DraftFamily f{"eagle", {&static_tree_strategy(), &eagle_chain_strategy(), &eagle2_strategy()},
                             &eagle_heads()};
  return f;
}

}  // namespace draftlab
