// Subcommands of the `draftlab` executable. Each takes the arguments after its name and returns an exit code.
#pragma once

namespace draftlab::cli {

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
int run_plot(int argc, char** argv);
int run_schema(int argc, char** argv);

}  // namespace draftlab::cli
