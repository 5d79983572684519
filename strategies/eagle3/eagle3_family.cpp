// The eagle3 family (EAGLE-3): its head (eagle3_head.h), its trainer with training-time test (eagle3_training.h),
// and the strategy eagle3 (eagle3_strategy.cpp): EAGLE-2's tree grown by the EAGLE tree grower over this head.
#include <sstream>

#include "core/base/error.h"
#include "strategies/eagle3/eagle3_gguf.h"
#include "strategies/eagle3/eagle3_head.h"
#include "strategies/eagle3/eagle3_strategy.h"
#include "strategies/eagle3/eagle3_training.h"
#include "strategies/registry.h"

namespace draftlab {

namespace {

// --feature-layers: "" (the official 2, L/2, L-3), "top" (L three times, given L), or three indices >= 1. Checks the
// form; the range once the target is known (L > 0).
std::vector<int64_t> parse_feature_layers(const std::string& text, int64_t L) {
  if (text.empty()) return {};
  if (text == "top") return L > 0 ? std::vector<int64_t>{L, L, L} : std::vector<int64_t>{};
  std::vector<int64_t> layers;
  std::stringstream list(text);
  for (std::string v; std::getline(list, v, ',');) {
    int64_t layer = 0;
    check(parse_option_int(v, &layer) && layer >= 1,
          "--feature-layers: expected three layer indices >= 1 or top, got '" + text + "'");
    layers.push_back(layer);
  }
  check(layers.size() == 3, "--feature-layers: expected three layers, got '" + text + "'");
  for (int64_t layer : layers)
    check(L <= 0 || layer <= L, "--feature-layers: expected three layer indices in 1.." + std::to_string(L) +
                                    " (the target's layers) or top, got '" + text + "'");
  return layers;
}

void check_options(const StrategyOptions& o) {
  const double decay = o.get_double("ttt-decay");
  check(decay > 0, "--ttt-decay: expected a number in (0, 1], got " + o.get_string("ttt-decay"));
  parse_feature_layers(o.get_string("feature-layers"), 0);
  check(o.get_string("vocab-mapping").empty() || o.get_int("draft-vocab") == 0,
        "--vocab-mapping: the draft vocabulary comes from the file; --draft-vocab " + o.get_string("draft-vocab") +
            " cannot be given with it");
}

HeadTrainingResult train(const HeadTrainingRun& run) {
  Eagle3TrainingOptions o;
  static_cast<HeadTrainingOptions&>(o) = run.common;
  o.draft_vocab = run.options.get_int("draft-vocab");
  o.steps = static_cast<int>(run.options.get_int("ttt-steps"));
  o.decay = run.options.get_double("ttt-decay");
  o.feature_layers = parse_feature_layers(run.options.get_string("feature-layers"),
                                          run.target.config().num_hidden_layers);
  o.eagle31 = run.options.get_string("variant") == "eagle3.1";
  o.vocab_mapping = run.options.get_string("vocab-mapping");
  return train_eagle3_head(run.target, o, run.data);
}

}  // namespace

const HeadFamily& eagle3_heads() {
  static const HeadFamily f = [] {
    HeadFamily f;
    f.name = "eagle3";
    f.title = "EAGLE-3 head";
    f.summary = "EAGLE-3: fc(3d -> d) over three target layers, one decoder layer over [embedding; feature], its own "
                "norm and draft-vocabulary LM head";
    f.recognises = is_eagle3_config;
    f.tree_strategy = "eagle3";
    f.load_feature_head = [](const std::string& path, const LlamaModel& target) {
      return std::shared_ptr<const FeatureHead>(Eagle3Head::load(path, target));
    };
    f.random_feature_head = [](const LlamaModel& target, const StrategyOptions& o) {
      return std::shared_ptr<const FeatureHead>(Eagle3Head::random(target, static_cast<uint64_t>(o.get_int("head_seed")),
                                                                   o.get_int("draft_vocab"), {}, {},
                                                                   o.get_string("head_variant") == "eagle3.1"));
    };
    f.random_head_options = {choice_option("head_variant", {"eagle3", "eagle3.1"},
                                           "the random head's variant (eagle3.1: fc_norm, norm_output)")};
    f.training_options = {
        integer_option("draft-vocab", 0, 0, 100000000,
                       "K > 0: the head's own LM head of K rows, the K most frequent tokens predicted under the loss "
                       "mask; 0 = the full vocabulary"),
        integer_option("ttt-steps", 7, 1, 64,
                       "training-time test: unrolled steps K, each feeding the head's own output back (the paper's 7)"),
        number_option("ttt-decay", 0.8, 0, 1, "step k's loss weighs decay^k (0 < decay <= 1)"),
        text_option("feature-layers", "",
                    "the three target layers whose inputs the head reads, comma-separated (0-based layer indices, L = "
                    "the last layer's output; default: the official 2, L/2, L-3), or top: L three times (EAGLE-3 "
                    "Table 2's TTT without fusion)"),
        choice_option("variant", {"eagle3", "eagle3.1"},
                      "eagle3.1: EAGLE-3.1's head (an RMSNorm per target feature before fc, the normed output fed "
                      "back; config.json fc_norm / norm_output)"),
        path_option("vocab-mapping", false,
                    "a SpecForge vocabulary-mapping file (torch.save of d2t and t2d): its draft vocabulary instead of "
                    "one counted from the data")};
    f.check_training_options = check_options;
    f.train = train;
    f.export_gguf = [](const std::string& head, const LlamaModel& target, const Tokenizer& tokenizer,
                       const std::string& out, GgmlType type, const std::string& name) {
      export_eagle3_gguf(*Eagle3Head::load(head, target), tokenizer, out, type, name);
    };
    return f;
  }();
  return f;
}

const DraftFamily& eagle3_family() {
  static const DraftFamily f{"eagle3", {&eagle3_strategy()}, &eagle3_heads()};
  return f;
}

}  // namespace draftlab
