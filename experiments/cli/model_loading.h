// Shared command-line plumbing: the options every model-using command takes, and loading model + tokenizer.
#pragma once

#include <boost/program_options.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/model/llama_model.h"
#include "core/model/sampler.h"
#include "core/text/tokenizer.h"

namespace draftlab::cli {

struct ModelOptions {
  std::string model_path;
  std::string tokenizer_path;  // empty: tokenizer.json in the model folder
  std::string dtype = "float32";
  std::string device = "cpu";
  std::string path = "auto";     // CPU forward: auto, native, reference
  std::string weights = "auto";  // native path weight storage: auto (as stored), float32, float16, bfloat16
  std::string kv_cache = "auto";  // KV cache storage: auto (the compute dtype), float32, float16
  std::string quant_dot = "float";  // how q8_0 / q4_0 weights meet activations: float, int8
  int threads = 0;  // 0: $OMP_NUM_THREADS if set, else libtorch's default (physical cores)
  bool verbose = false;
};

// --top-k (named by top_k_flag: exp's --top-k is a tree axis), --top-p and --sampling-order, for every command that
// samples at T > 0; the temperature stays each command's own flag. Checked and applied by apply_sampling_order().
struct SamplingFilterOptions {
  int64_t top_k = 0;
  double top_p = 1.0;
  std::string order = "top_k,top_p";
};
void add_sampling_filter_options(boost::program_options::options_description& desc, SamplingFilterOptions& o,
                                 const char* top_k_flag = "top-k");
// Copies them into params (top_k, top_p, top_p_first). Throws Error naming --sampling-order for a bad order.
void apply_sampling_filters(const SamplingFilterOptions& o, SamplingParams& params);

// Parses argv against desc (which should have --help). Returns false after printing help for --help; throws
// Error naming the command for bad or missing options. Every command also takes --options-file FILE (repeatable):
// more of its options, one `name = value` per line (`#` comments; a switch as `name = true`), e.g. a training
// recipe (data/recipes/); the command line's own values win, then the earlier file's. Error naming the file for an
// unreadable file or a line that is not an option of the command.
bool parse_command_line(const boost::program_options::options_description& desc, int argc, char** argv,
                        const std::string& command, boost::program_options::variables_map& vm,
                        const boost::program_options::positional_options_description* positional = nullptr,
                        const boost::program_options::options_description* shown_in_help = nullptr);

// "draftlab COMMAND ARGS...", the options that took effect from --options-file files appended as
// "[FILE: --name value ...]":
// what a results file or a training log records, so it still says what ran when a recipe file changes later.
std::string recorded_command_line(int argc, char** argv, const boost::program_options::variables_map& vm);

// Adds --model, --tokenizer, --dtype, --device, --path, --weights, --kv-cache, --threads, --verbose.
void add_model_options(boost::program_options::options_description& desc, ModelOptions& o);

struct LoadedModel {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

// Text to prompt ids: wraps the text as one user turn of the chat template (plain = the text itself) and adds
// BOS where the template expects the tokenizer to (all but llama3-instruct). Throws Error on an empty result.
std::vector<int64_t> encode_prompt(const Tokenizer& tokenizer, const std::string& text, const std::string& chat_template);

// Sets the thread count, prints the environment with --verbose, loads model and tokenizer, and checks that the
// tokenizer's vocabulary fits the model's. Throws Error naming the file on any problem.
LoadedModel load_model_and_tokenizer(const ModelOptions& o);

// The compute options --dtype, --device, --path, --weights and --kv-cache ask for (checked). Also sets --threads.
ComputeOptions compute_options(const ModelOptions& o);

}  // namespace draftlab::cli
