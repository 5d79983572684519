// draftlab perplexity: a model's perplexity on a slice of a text file, through the inference forward.
#include <boost/program_options.hpp>

#include <cstdio>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/model/perplexity.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/model_loading.h"

namespace po = boost::program_options;

namespace draftlab::cli {

int run_perplexity(int argc, char** argv) {
  ModelOptions model_opts;
  std::string corpus;
  int64_t offset = 0, max_bytes = 20000, context = 0;
  po::options_description desc("draftlab perplexity: perplexity on a slice of a text file\n\noptions");
  add_model_options(desc, model_opts);
  desc.add_options()("help,h", "show this help")
      ("corpus", po::value(&corpus)->required(), "text file")
      ("offset", po::value(&offset)->default_value(offset), "first byte of the slice (negative: from the end)")
      ("max-bytes", po::value(&max_bytes)->default_value(max_bytes), "bytes in the slice")
      ("context", po::value(&context)->default_value(context), "window length in tokens (0 = the model's context)");
  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "perplexity", vm)) return 0;
  check(max_bytes > 0, "--max-bytes: expected a positive number, got " + std::to_string(max_bytes));

  LoadedModel loaded = load_model_and_tokenizer(model_opts);
  const std::string text = read_text_file(corpus);
  const int64_t size = static_cast<int64_t>(text.size());
  const int64_t begin = offset < 0 ? std::max<int64_t>(0, size + offset) : std::min(offset, size);
  const std::string slice = text.substr(begin, max_bytes);
  if (slice.empty()) throw Error::at(corpus, "the slice at --offset " + std::to_string(offset) + " is empty");
  std::vector<int64_t> ids;
  for (int32_t id : loaded.tokenizer->encode(slice, /*add_bos=*/true)) ids.push_back(id);
  const auto r = perplexity(*loaded.model, ids, context > 0 ? context : loaded.model->config().max_position_embeddings);
  std::printf("%s bytes [%ld, %ld): %ld predicted tokens, loss %.4f nats/token, perplexity %.4f\n", corpus.c_str(),
              (long)begin, (long)(begin + static_cast<int64_t>(slice.size())), (long)r.predicted_tokens, r.mean_nll,
              r.perplexity);
  return 0;
}

}  // namespace draftlab::cli
