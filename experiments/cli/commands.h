// Subcommands of the `draftlab` executable. Each takes the arguments after its name and returns an exit code.
#pragma once

#include <string>

namespace draftlab::cli {

// The command table, once: `usage` lists the commands; run_command(argc, argv) runs argv[0] (a command name) with
// the arguments after it, as the executable and the Python module (draftlab.run) both do. Returns the exit code,
// 2 for an unknown command (after printing the usage); a command's Error propagates.
const char* usage();
int run_command(int argc, char** argv);

int run_generate(int argc, char** argv);
int run_compare(int argc, char** argv);
int run_strategies(int argc, char** argv);
int run_train_tokenizer(int argc, char** argv);
int run_train_lm(int argc, char** argv);
int run_train_head(int argc, char** argv);
int run_gen_head_data(int argc, char** argv);
int run_convert_head(int argc, char** argv);
int run_export_llama2c(int argc, char** argv);
int run_export_gguf(int argc, char** argv);
int run_perplexity(int argc, char** argv);
int run_exp(int argc, char** argv);
int run_merge(int argc, char** argv);
int run_table(int argc, char** argv);
int run_bounds(int argc, char** argv);
int run_plot(int argc, char** argv);
int run_schema(int argc, char** argv);
int run_launch(int argc, char** argv);

}  // namespace draftlab::cli
