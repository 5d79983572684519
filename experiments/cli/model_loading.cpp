#include "experiments/cli/model_loading.h"

#include <ATen/Parallel.h>

#include <fstream>
#include <iostream>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/base/platform.h"
#include "core/text/chat_template.h"

namespace po = boost::program_options;

namespace draftlab::cli {

void add_sampling_filter_options(po::options_description& desc, SamplingFilterOptions& o, const char* top_k_flag) {
  desc.add_options()
      (top_k_flag, po::value(&o.top_k)->default_value(o.top_k), "T > 0: keep the k most probable tokens (0 = off)")
      ("top-p", po::value(&o.top_p)->default_value(o.top_p), "T > 0: nucleus sampling mass (1 = off)")
      ("sampling-order", po::value(&o.order)->default_value(o.order),
       "when both are set: top_k,top_p (Hugging Face generate, llama.cpp) or top_p,top_k (the official EAGLE code)");
}

void apply_sampling_filters(const SamplingFilterOptions& o, SamplingParams& params) {
  params.top_k = o.top_k;
  params.top_p = o.top_p;
  params.top_p_first = parse_sampling_order(o.order);
}

namespace {

constexpr const char* kOptionsFile = "options-file";
constexpr const char* kOptionsFileFlags = "options-file flags";  // vm key: what the files said, for the record

// Stores the options of one --options-file into vm (values already there from the command line or an earlier file
// win) and returns those that took effect as "--name value ...".
std::string store_options_file(const std::string& file, const po::options_description& desc,
                               const std::string& command, po::variables_map& vm) {
  std::ifstream in(file);
  if (!in) throw Error("--options-file " + file + ": cannot read the file (draftlab " + command + ")");
  po::parsed_options parsed(&desc);
  try {
    parsed = po::parse_config_file(in, desc, false);
  } catch (const po::error& e) {
    throw Error("--options-file " + file + ": " + e.what() + " (expected `name = value` lines naming options of "
                "draftlab " + command + ", see its --help)");
  }
  // The flags that take effect: a name already given (command line, earlier file) keeps its value, unless it composes.
  std::string flags;
  for (const po::option& o : parsed.options) {
    const auto given = vm.find(o.string_key);
    const po::value_semantic* semantic = desc.find(o.string_key, false).semantic().get();
    if (given != vm.end() && !given->second.defaulted() && !semantic->is_composing()) continue;
    for (const std::string& value : o.value) flags += (flags.empty() ? "--" : " --") + o.string_key + " " + value;
  }
  po::store(parsed, vm);
  return flags;
}

}  // namespace

bool parse_command_line(const po::options_description& desc, int argc, char** argv, const std::string& command,
                        po::variables_map& vm, const po::positional_options_description* positional,
                        const po::options_description* shown_in_help) {
  po::options_description with_files;
  with_files.add(desc);
  with_files.add_options()(kOptionsFile, po::value<std::vector<std::string>>()->composing(),
                           "more options from FILE: `name = value` lines (the command line wins)");
  try {
    po::command_line_parser parser(argc, argv);
    parser.options(with_files);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), vm);
    if (vm.count("help")) {
      std::cout << (shown_in_help ? *shown_in_help : desc)
                << "  --options-file FILE                   more options from FILE, one `name = value` per line "
                   "(repeatable; the command line wins)\n\n";
      return false;
    }
    std::string recorded;
    if (vm.count(kOptionsFile))
      for (const std::string& file : vm[kOptionsFile].as<std::vector<std::string>>())
        recorded += "[" + file + ": " + store_options_file(file, desc, command, vm) + "]";
    if (!recorded.empty()) vm.insert({kOptionsFileFlags, po::variable_value(boost::any(recorded), false)});
    po::notify(vm);
  } catch (const po::error& e) {
    throw Error(std::string(e.what()) + " (see draftlab " + command + " --help)");
  }
  return true;
}

std::string recorded_command_line(int argc, char** argv, const po::variables_map& vm) {
  std::string line = "draftlab";
  for (int i = 0; i < argc; ++i) line += std::string(" ") + argv[i];
  if (vm.count(kOptionsFileFlags)) line += " " + vm[kOptionsFileFlags].as<std::string>();
  return line;
}

void add_model_options(po::options_description& desc, ModelOptions& o) {
  desc.add_options()
      ("model,m", po::value(&o.model_path)->required(),
       "Hugging Face model folder (config.json + safetensors), a llama2.c .bin checkpoint, or a .gguf")
      ("tokenizer", po::value(&o.tokenizer_path),
       "tokenizer file: tokenizer.json, tokenizer.model, llama2.c tokenizer.bin or .gguf "
       "(default: tokenizer.json in the model folder, or the .gguf model itself)")
      ("dtype", po::value(&o.dtype)->default_value(o.dtype), "compute dtype: float32, bfloat16, float16")
      ("device", po::value(&o.device)->default_value(o.device), "cpu, cuda, cuda:N")
      ("path", po::value(&o.path)->default_value(o.path),
       "CPU forward: native (draftlab's own kernels; float32 activations), reference (libtorch ops), auto = native "
       "wherever it applies")
      ("weights", po::value(&o.weights)->default_value(o.weights),
       "weight storage on the native path: auto (as the checkpoint stores them; a Q8_0 / Q4_0 .gguf: q8_0 / q4_0), "
       "float32, float16, bfloat16, q8_0, q4_0 (ggml's 32-value blocks, quantized at load; rows of a multiple of 32); "
       "accumulation is float32")
      ("quant-dot", po::value(&o.quant_dot)->default_value(o.quant_dot),
       "how q8_0 / q4_0 weights meet activations on the native path: float (weights widened to float32: the "
       "dequantized model's arithmetic) or int8 (activations quantized to Q8_0 per row, integer dot products as "
       "llama.cpp does: faster, slightly different numbers; lossless against vanilla in the same setting)")
      ("kv-cache", po::value(&o.kv_cache)->default_value(o.kv_cache),
       "KV cache storage: auto (the compute dtype), float32, float16 (half the bytes attention reads; widened "
       "exactly, summed in float32)")
      ("threads", po::value(&o.threads)->default_value(o.threads),
       "threads: the native path's worker pool and libtorch's intra-op threads. 0 = $OMP_NUM_THREADS when set, "
       "else libtorch's default, one per physical core as its cpuinfo counts them (1 on the 2-vCPU VMs measured "
       "here, where --threads 2 decodes ts-target about 1.7x faster); --verbose prints the number in force. "
       "Measure on an idle machine: a thread that shares its core with another process stalls every parallel step")
      ("verbose,v", po::bool_switch(&o.verbose), "print the environment (BLAS, threads, model shape)");
}

std::vector<int64_t> encode_prompt(const Tokenizer& tokenizer, const std::string& text, const std::string& chat_template) {
  const ChatTemplate t = parse_chat_template(chat_template);
  const std::string rendered =
      t == ChatTemplate::Plain ? text : render_chat(t, {{"user", text}}, /*add_generation_prompt=*/true);
  std::vector<int64_t> ids;
  for (int32_t id : tokenizer.encode(rendered, /*add_bos=*/t != ChatTemplate::Llama3Instruct)) ids.push_back(id);
  if (ids.empty()) throw Error("--prompt: empty prompt and the tokenizer has no BOS token to start from");
  return ids;
}

ComputeOptions compute_options(const ModelOptions& o) {
  check(o.threads >= 0, "--threads: expected 0 (auto) or a positive number, got " + std::to_string(o.threads));
  if (o.threads > 0) at::set_num_threads(o.threads);  // else libtorch's default: OMP_NUM_THREADS or all cores
  ComputeOptions compute;
  compute.dtype = parse_compute_dtype(o.dtype);
  compute.device = parse_compute_device(o.device);
  compute.cpu_path = parse_cpu_path(o.path);
  compute.weights = parse_weight_storage(o.weights);
  compute.kv_cache = parse_kv_cache_storage(o.kv_cache);
  compute.block_dot = parse_block_dot(o.quant_dot);
  check_supported(compute);
  uses_native_path(compute);  // throws when --path native cannot apply
  return compute;
}

LoadedModel load_model_and_tokenizer(const ModelOptions& o) {
  const ComputeOptions compute = compute_options(o);

  if (o.verbose) {
    std::cerr << "cpu: " << cpu_model_name() << "\n"
              << "blas: " << blas_description() << "\n"
              << "threads: " << at::get_num_threads() << "\n";
  }

  std::string tok_path = o.tokenizer_path;
  if (tok_path.empty()) {
    if (is_directory(o.model_path) && is_file(o.model_path + "/tokenizer.json")) {
      tok_path = o.model_path + "/tokenizer.json";
    } else if (o.model_path.size() > 5 && o.model_path.compare(o.model_path.size() - 5, 5, ".gguf") == 0) {
      tok_path = o.model_path;  // a GGUF model carries its vocabulary
    } else {
      throw Error("--tokenizer: required for " + o.model_path +
                  " (no tokenizer.json in a model folder to default to)");
    }
  }

  LoadedModel loaded;
  loaded.model = LlamaModel::load(o.model_path, compute);
  loaded.tokenizer = load_tokenizer(tok_path);
  const ModelConfig& c = loaded.model->config();
  if (loaded.tokenizer->vocab_size() > c.vocab_size)
    throw Error::in_file(tok_path, "vocabulary size", "at most the model's vocab_size " + std::to_string(c.vocab_size),
                         std::to_string(loaded.tokenizer->vocab_size()));
  if (o.verbose) {
    std::cerr << "model: " << o.model_path << " (" << loaded.model->num_parameters() << " parameters, d="
              << c.hidden_size << ", layers=" << c.num_hidden_layers << ", heads=" << c.num_attention_heads << "/"
              << c.num_key_value_heads << ", vocab=" << c.vocab_size << ", context=" << c.max_position_embeddings
              << ", dtype=" << compute_dtype_name(compute.dtype) << ")\n"
              << "forward: " << loaded.model->path_description() << "\n"
              << "tokenizer: " << tok_path << " (vocab " << loaded.tokenizer->vocab_size() << ")\n";
  }
  return loaded;
}

}  // namespace draftlab::cli
