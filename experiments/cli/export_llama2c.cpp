// draftlab export-llama2c: write a model (e.g. one trained by train-lm) as a llama2.c v0 .bin checkpoint.
#include <boost/program_options.hpp>

#include <cstdio>

#include "core/base/error.h"
#include "core/model/llama_model.h"
#include "core/training/llama2c_export.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/model_loading.h"

namespace po = boost::program_options;

namespace draftlab::cli {

int run_export_llama2c(int argc, char** argv) {
  std::string model_path, out;
  po::options_description desc("draftlab export-llama2c: write a model as a llama2.c v0 .bin (float32)\n\noptions");
  desc.add_options()
      ("help,h", "show this help")
      ("model,m", po::value(&model_path)->required(), "Hugging Face model folder or safetensors file")
      ("out", po::value(&out)->required(), "the .bin file to write");
  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "export-llama2c", vm)) return 0;
  const auto model = LlamaModel::load(model_path, reference_options());
  export_llama2c(*model, out);
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

}  // namespace draftlab::cli
