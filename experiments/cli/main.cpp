// draftlab - command-line entry point. `draftlab <command> --help` documents each command.
#include <ATen/Parallel.h>

#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include "core/base/error.h"
#include "core/base/platform.h"
#include "experiments/cli/commands.h"

namespace {

void print_usage() {
  std::cout << "usage: draftlab <command> [options]\n\n"
               "commands:\n"
               "  generate   decode a prompt (vanilla or --strategy NAME), print text, tokens/s and tau\n"
               "  strategies the draft strategies with their options, defaults and ranges (--markdown: README's table)\n"
               "  compare    strategies beside vanilla on the same prompts: speed, speedup, tau, identical output\n"
               "  train-tokenizer  train a byte-level BPE vocabulary on a corpus (tokenizer.json out)\n"
               "  train-lm   pretrain a small Llama from scratch on a text corpus (HF folder out, resumable)\n"
               "  train-head train an EAGLE draft head for a target on a text corpus (head folder out, resumable)\n"
               "  gen-head-data  continue prompts with the target: head training data (train-head --data)\n"
               "  convert-head  a published EAGLE head's pytorch_model.bin -> a safetensors head folder\n"
               "  export-llama2c  write a model as a llama2.c v0 .bin checkpoint\n"
               "  export-gguf  write a model and its vocabulary as a GGUF file for llama.cpp (f32, f16 or bf16)\n"
               "  perplexity perplexity of a model on a slice of a text file\n"
               "  exp        run an experiment driver (speed, alpha, calibration, ..., sweep) into an HDF5 results file\n"
               "  merge      combine results files of one experiment (sweep shards)\n"
               "  table      the papers' tables (Markdown or LaTeX) from an experiment's results file\n"
               "  plot       the papers' figures (PNG + SVG) from an experiment's results file\n"
               "  schema     the results schema as Markdown (docs/results-schema.md) or Python (analysis/results_schema.py)\n\n"
               "Run 'draftlab <command> --help' for the options of a command.\n";
}

}  // namespace

int main(int argc, char** argv) {
  // Must run before the first BLAS call (it may re-execute the program with OPENBLAS_CORETYPE set).
  draftlab::prepare_process_environment(argc, argv);
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  try {
    if (command == "generate") return draftlab::cli::run_generate(argc - 1, argv + 1);
    if (command == "strategies") return draftlab::cli::run_strategies(argc - 1, argv + 1);
    if (command == "compare") return draftlab::cli::run_compare(argc - 1, argv + 1);
    if (command == "train-tokenizer") return draftlab::cli::run_train_tokenizer(argc - 1, argv + 1);
    if (command == "train-lm") return draftlab::cli::run_train_lm(argc - 1, argv + 1);
    if (command == "train-head") return draftlab::cli::run_train_head(argc - 1, argv + 1);
    if (command == "gen-head-data") return draftlab::cli::run_gen_head_data(argc - 1, argv + 1);
    if (command == "convert-head") return draftlab::cli::run_convert_head(argc - 1, argv + 1);
    if (command == "export-llama2c") return draftlab::cli::run_export_llama2c(argc - 1, argv + 1);
    if (command == "export-gguf") return draftlab::cli::run_export_gguf(argc - 1, argv + 1);
    if (command == "perplexity") return draftlab::cli::run_perplexity(argc - 1, argv + 1);
    if (command == "exp") return draftlab::cli::run_exp(argc - 1, argv + 1);
    if (command == "merge") return draftlab::cli::run_merge(argc - 1, argv + 1);
    if (command == "table") return draftlab::cli::run_table(argc - 1, argv + 1);
    if (command == "plot") return draftlab::cli::run_plot(argc - 1, argv + 1);
    if (command == "schema") return draftlab::cli::run_schema(argc - 1, argv + 1);
    std::cerr << "draftlab: unknown command '" << command << "'\n";
    print_usage();
    return 2;
  } catch (const draftlab::Error& e) {
    std::cerr << "draftlab " << command << ": error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    // c10::Error and friends: unexpected, but still a clean exit rather than a crash.
    std::cerr << "draftlab " << command << ": internal error: " << e.what() << "\n";
    return 1;
  }
}
