#include "experiments/cli/commands.h"

#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>

namespace draftlab::cli {

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

const Command kCommands[] = {
    {"generate", run_generate, "decode a prompt (vanilla or --strategy NAME), print text, tokens/s and tau"},
    {"strategies", run_strategies, "the draft strategies with their options, defaults and ranges (--markdown: README's table)"},
    {"compare", run_compare, "strategies beside vanilla on the same prompts: speed, speedup, tau, identical output"},
    {"train-tokenizer", run_train_tokenizer, "train a byte-level BPE vocabulary on a corpus (tokenizer.json out)"},
    {"train-lm", run_train_lm, "pretrain a small Llama from scratch on a text corpus (HF folder out, resumable)"},
    {"train-head", run_train_head, "train a draft head for a target on a text corpus (head folder out, resumable)"},
    {"launch", run_launch, "start N ranks of train-lm / train-head / gen-head-data here (torchrun's contract)"},
    {"gen-head-data", run_gen_head_data, "continue prompts with the target: head training data (train-head --data)"},
    {"convert-head", run_convert_head, "a published EAGLE head's pytorch_model.bin -> a safetensors head folder"},
    {"export-llama2c", run_export_llama2c, "write a model as a llama2.c v0 .bin checkpoint"},
    {"export-gguf", run_export_gguf, "write a model and its vocabulary as a GGUF file for llama.cpp (f32, f16 or bf16)"},
    {"perplexity", run_perplexity, "perplexity of a model on a slice of a text file"},
    {"exp", run_exp, "run an experiment driver (speed, alpha, calibration, ..., sweep) into an HDF5 results file"},
    {"merge", run_merge, "combine results files of one experiment (sweep shards)"},
    {"table", run_table, "the papers' tables (Markdown or LaTeX) from an experiment's results file"},
    {"bounds", run_bounds, "each run against the bounds of its acceptance and this machine's forward cost (Sequoia, ceiling)"},
    {"plot", run_plot, "the papers' figures (PNG + SVG) from an experiment's results file"},
    {"schema", run_schema, "the results schema as Markdown (docs/results-schema.md) or Python (analysis/results_schema.py)"},
};

}  // namespace

const char* usage() {
  static const std::string text = [] {
    std::string t = "usage: draftlab <command> [options]\n\ncommands:\n";
    for (const Command& c : kCommands) {
      std::string name = c.name;
      name.resize(std::max<size_t>(name.size() + 1, 11), ' ');
      t += "  " + name + c.help + "\n";
    }
    return t + "\nRun 'draftlab <command> --help' for the options of a command.\n";
  }();
  return text.c_str();
}

int run_command(int argc, char** argv) {
  for (const Command& c : kCommands)
    if (argc >= 1 && std::strcmp(argv[0], c.name) == 0) return c.run(argc, argv);
  std::cerr << "draftlab: unknown command '" << (argc >= 1 ? argv[0] : "") << "'\n" << usage();
  return 2;
}

}  // namespace draftlab::cli
