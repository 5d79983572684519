// draftlab train-head: train draft heads for a frozen target on a text corpus (stories separated by blank lines),
// chat data or target-generated token lines, and write a head folder that the family's strategies run.
// --kind names the family (strategies/head_family.h: eagle, eagle3, medusa, hydra); the flags every family shares
// are here, each family's own flags and its trainer are declared in its folder (HeadFamily::training_options,
// HeadFamily::train), and every flag is checked before the target or the data loads. Every family trains through
// one pipeline (core/training/head_training.h); --resume continues a run exactly.
#include <boost/program_options.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/base/error.h"
#include "core/base/platform.h"
#include "core/text/chat_template.h"
#include "core/training/head_data.h"
#include "strategies/head_family.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/data_parallel_options.h"
#include "experiments/cli/model_loading.h"
#include "experiments/cli/trainer_options.h"

namespace po = boost::program_options;

namespace draftlab::cli {

namespace {

// Every head family's own flags (HeadFamily::training_options), each once, in declaration order: families that
// share a flag declare it alike. A flag's value arrives as text and is checked against the chosen family's table.
struct FamilyFlag {
  const OptionSpec* spec = nullptr;  // the first declaration (type, range, default)
  std::vector<const HeadFamily*> families;
  std::string value;
};

std::string family_names(const std::vector<const HeadFamily*>& families) {
  std::string s;
  for (const HeadFamily* f : families) s += (s.empty() ? "" : ", ") + f->name;
  return s;
}

po::options_description family_flags(std::vector<FamilyFlag>& flags) {
  for (const HeadFamily* f : head_family_table())
    for (const OptionSpec& o : f->training_options) {
      auto it = std::find_if(flags.begin(), flags.end(), [&](const FamilyFlag& g) { return g.spec->key == o.key; });
      if (it == flags.end()) it = flags.insert(flags.end(), FamilyFlag{&o, {}, ""});
      check(it->spec->type == o.type, "train-head: --" + o.key + " is declared with two types by the head families");
      it->families.push_back(f);
    }
  po::options_description desc("the head families' own options (--kind FAMILY: the families that take each)");
  for (FamilyFlag& flag : flags) {
    std::string help = "[" + family_names(flag.families) + "] " + flag.spec->range();
    if (!flag.spec->default_value.empty()) help += ", default " + flag.spec->default_value;
    // One help when the families say the same, else each family's.
    auto help_of = [&](const HeadFamily* f) { return f->training_option(flag.spec->key)->help; };
    const bool alike = std::all_of(flag.families.begin(), flag.families.end(),
                                   [&](const HeadFamily* f) { return help_of(f) == help_of(flag.families[0]); });
    if (alike) help += ": " + help_of(flag.families[0]);
    for (const HeadFamily* f : flag.families)
      if (!alike) help += "; " + f->name + ": " + help_of(f);
    auto* value = po::value(&flag.value);
    if (flag.spec->type == OptionType::Boolean) value->zero_tokens()->implicit_value("true");
    desc.add_options()(flag.spec->key.c_str(), value, help.c_str());
  }
  return desc;
}

// The chosen family's options from the flags given: a flag of another family is refused, values are checked
// against the family's table, defaults filled in, then the family's rules across flags.
StrategyOptions resolve_family_flags(const HeadFamily& family, const std::vector<FamilyFlag>& flags,
                                     const po::variables_map& vm) {
  StrategyOptions options;
  for (const FamilyFlag& flag : flags) {
    const std::string& key = flag.spec->key;
    if (!vm.count(key)) continue;
    const OptionSpec* spec = family.training_option(key);
    if (!spec)
      throw Error("--" + key + ": applies to --kind " + family_names(flag.families) + ", not --kind " + family.name);
    if (!spec->accepts(flag.value))
      throw Error("--" + key + ": expected " + spec->range() + " (--kind " + family.name + "), got '" + flag.value + "'");
    options.set(key, flag.value);
  }
  for (const OptionSpec& o : family.training_options) options.set_default(o.key, o.default_value);
  if (family.check_training_options) family.check_training_options(options);
  return options;
}

}  // namespace

int run_train_head(int argc, char** argv) {
  keep_freed_memory_for_training();  // large activations reused each step, not mapped anew (platform.h)
  ModelOptions mo;
  std::string corpus, kind_name = "eagle";
  std::string data_path, data_format = "auto", chat_template = "plain", cache_dtype = "float32", samples = "whole";
  DataParallelFlags dist;
  TrainingRunFlags run_flags;
  double data_fraction = 1.0;
  HeadTrainingOptions o;  // the options every family shares
  o.context = 128;
  o.batch = 16;
  TrainerOptions& t = o.trainer;
  t.steps = 2000;
  t.lr = 3e-4;
  t.warmup = 100;
  t.weight_decay = 0.0;
  t.beta1 = 0.9;
  t.beta2 = 0.95;
  t.grad_clip = 0.5;

  po::options_description desc("draftlab train-head: train draft heads for a target on a text corpus\n\noptions");
  desc.add_options()("help,h", "show this help");
  add_model_options(desc, mo);
  desc.add_options()
      ("kind", po::value(&kind_name)->default_value(kind_name), ("the head family: " + head_family_names()).c_str())
      ("corpus", po::value(&corpus), "text file of stories separated by blank lines (or --data)")
      ("data", po::value(&data_path),
       "training data instead of --corpus: text stories, chat JSONL (loss on assistant turns) or token lines from "
       "gen-head-data (loss on the continuations); see core/training/head_data.h")
      ("data-format", po::value(&data_format)->default_value(data_format),
       "auto (*.jsonl chat, *.tokens tokens, else text), text, chat or tokens")
      ("chat-template", po::value(&chat_template)->default_value(chat_template),
       "template rendering chat data: plain, vicuna, llama2-chat, llama3-instruct")
      ("feature-cache", po::value(&o.feature_cache.path),
       "HDF5 file of the target's features of the training windows: built on first use, then read instead of "
       "running the target (refused if model, tokenizer, data, context, batch or seed differ)")
      ("cache-steps", po::value(&o.feature_cache.steps)->default_value(o.feature_cache.steps),
       "when building the cache: the steps whose windows it holds (0: --steps); later steps draw from it at random")
      ("feature-cache-dtype", po::value(&cache_dtype)->default_value(cache_dtype),
       "when building the cache: float32 (replays exactly) or float16 (half the size)")
      ("samples", po::value(&samples)->default_value(samples),
       "whole: each row one sequence from its start (cut at context + 1 tokens, padded), so the target's features "
       "see its whole left context as at inference (the official trainers'); windows: random windows of the "
       "concatenated data, features of the window alone (draftlab before 2026-11-27)")
      ("data-fraction", po::value(&data_fraction)->default_value(data_fraction),
       "train on the first F of the training split's tokens (0 < F <= 1; the validation split stays whole): data "
       "scaling, EAGLE-3 Figure 1");
  std::vector<FamilyFlag> flags;
  desc.add(family_flags(flags));
  add_training_run_options(desc, o, run_flags, "rows per step", "positions per row (target rows are one token longer)");
  add_data_parallel_options(desc, dist);

  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "train-head", vm)) return 0;
  // Everything that needs no model is checked here, before the target and the data load.
  const HeadFamily& family = find_head_family(kind_name);
  const StrategyOptions family_options = resolve_family_flags(family, flags, vm);
  apply_training_run_flags(run_flags, o);
  o.command_line = recorded_command_line(argc, argv, vm);

  check(corpus.empty() != data_path.empty(), "train-head: expected exactly one of --corpus and --data");
  check_training_fraction(data_fraction);
  const Sampling sampling = parse_sampling(samples);
  const std::string source = corpus.empty() ? data_path : corpus;
  const HeadDataFormat format = corpus.empty() ? parse_head_data_format(data_format, data_path) : HeadDataFormat::Text;
  const ChatTemplate chat = parse_chat_template(chat_template);
  check(cache_dtype == "float32" || cache_dtype == "float16",
        "--feature-cache-dtype: expected float32 or float16, got " + cache_dtype);

  const LoadedModel loaded = load_model_and_tokenizer(mo);
  TextDataset data = load_head_data(source, format, *loaded.tokenizer, loaded.model->config().vocab_size, chat,
                                    run_flags.validation_every);
  data.keep_training_fraction(data_fraction);
  data.set_sampling(sampling);
  o.data_description = source + " (" + head_data_format_name(format) + ")";
  if (data_fraction < 1) {
    char fraction[32];
    std::snprintf(fraction, sizeof fraction, "%g", data_fraction);
    o.data_description += ", the first " + std::string(fraction) + " of its training split";
  }
  if (!o.feature_cache.path.empty()) {
    o.feature_cache.dtype = cache_dtype == "float16" ? at::kHalf : at::kFloat;
    o.feature_cache.quiet = t.quiet;
    o.feature_cache.model_path = mo.model_path;
    o.feature_cache.tokenizer = tokenizer_checksum(*loaded.tokenizer);
    o.feature_cache.data_source = source + " (" + head_data_format_name(format) + ")";
  }
  o.parallel = join_data_parallel(dist, loaded.model->options().device);
  const bool main_rank = !o.parallel || o.parallel->is_main();  // the others train in silence
  if (main_rank)
    std::fprintf(stderr, "%s %s: %ld sequences, %ld training and %ld validation tokens%s, sampled %s\n",
               head_data_format_name(format), source.c_str(), static_cast<long>(data.stories()),
               static_cast<long>(data.train_tokens()), static_cast<long>(data.validation_tokens()),
               data.has_loss_mask() ? ", with a loss mask" : "", sampling_name(sampling));
  if (const double padding = data.padding_share(o.context); main_rank && padding > 0.5)
    std::fprintf(stderr,
                 "note: with --samples whole, %.0f%% of each row is padding (the sequences are short for --context "
                 "%ld): a smaller --context with a larger --batch spends less compute per token, --samples windows "
                 "none\n",
                 100 * padding, static_cast<long>(o.context));
  const HeadTrainingRun run{*loaded.model, data, o, family_options,
                            [&](const std::string& flag) { return vm.count(flag) && !vm[flag].defaulted(); }};
  report_training_run(family.train(run), o);
  return 0;
}

}  // namespace draftlab::cli
