// draftlab export-gguf: write a model (HF folder, llama2.c .bin) as a GGUF file that llama.cpp runs, with its
// vocabulary; LlamaModel::load and the tokenizer loader read it back. With --head, a draft head of that model as
// the GGUF llama.cpp's speculative decoding reads (its family's HeadFamily::export_gguf).
#include <boost/program_options.hpp>

#include <cstdio>
#include <memory>
#include <optional>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/gguf.h"
#include "core/io/safetensors.h"
#include "core/model/llama_model.h"
#include "core/text/tokenizer.h"
#include "core/training/gguf_export.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/model_loading.h"
#include "strategies/head_family.h"

namespace po = boost::program_options;

namespace draftlab::cli {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The tensor type the checkpoint stores its weights in: the default --type, so the export is lossless and no
// larger than the source.
GgmlType stored_type(const std::string& model_path, const std::string& head_path) {
  if (!head_path.empty()) {  // a head folder: what its first tensor is stored as
    SafetensorsCollection head(is_directory(head_path) ? head_path + "/model.safetensors" : head_path);
    const TensorEntry* fc = head.find("fc.weight");  // every head family llama.cpp reads has one
    return fc && fc->dtype == DType::F16 ? kGgmlF16 : fc && fc->dtype == DType::BF16 ? kGgmlBF16 : kGgmlF32;
  }
  if (ends_with(model_path, ".bin")) return kGgmlF32;  // llama2.c checkpoints are float32
  const TensorEntry* embed = nullptr;
  std::unique_ptr<GgufTensorFile> gguf;
  std::unique_ptr<SafetensorsCollection> safetensors;
  if (ends_with(model_path, ".gguf")) {
    gguf = std::make_unique<GgufTensorFile>(model_path);
    const std::optional<uint32_t> type = gguf->stored_type("token_embd.weight");
    if (type == kGgmlQ8_0 || type == kGgmlQ4_0) return static_cast<GgmlType>(*type);
    embed = gguf->find("token_embd.weight");
  } else {
    safetensors = std::make_unique<SafetensorsCollection>(model_path);
    embed = safetensors->find("model.embed_tokens.weight");
  }
  if (embed && embed->dtype == DType::F16) return kGgmlF16;
  if (embed && embed->dtype == DType::BF16) return kGgmlBF16;
  return kGgmlF32;
}

GgmlType parse_type(const std::string& name) {
  if (name == "f32") return kGgmlF32;
  if (name == "f16") return kGgmlF16;
  if (name == "bf16") return kGgmlBF16;
  if (name == "q8_0") return kGgmlQ8_0;
  if (name == "q4_0") return kGgmlQ4_0;
  throw Error("--type: expected f32, f16, bf16, q8_0 or q4_0, got '" + name + "' (see draftlab export-gguf --help)");
}

std::string base_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  for (const char* ext : {".bin", ".safetensors", ".gguf"})
    if (ends_with(name, ext)) name.resize(name.size() - std::string(ext).size());
  return name;
}

}  // namespace

int run_export_gguf(int argc, char** argv) {
  std::string model_path, tokenizer_path, out, type_name, name, head_path;
  po::options_description desc(
      "draftlab export-gguf: write a model as a GGUF file (llama architecture) that llama.cpp runs, with its "
      "vocabulary\n\noptions");
  desc.add_options()
      ("help,h", "show this help")
      ("model,m", po::value(&model_path)->required(),
       "Hugging Face model folder (config.json + safetensors), a llama2.c .bin checkpoint or a .gguf")
      ("tokenizer", po::value(&tokenizer_path),
       "tokenizer.json (byte-level BPE), tokenizer.model (SentencePiece), llama2.c tokenizer.bin or .gguf "
       "(default: tokenizer.json in the model folder, or the .gguf model itself)")
      ("out,o", po::value(&out)->required(), "the .gguf file to write")
      ("type", po::value(&type_name),
       "tensor type of the matrices: f32, f16, bf16, or q8_0 / q4_0 (ggml's 32-value blocks, as llama-quantize "
       "--pure writes them) (default: what the checkpoint stores; llama2.c: f32). Norms are always f32, as "
       "llama.cpp expects")
      ("head", po::value(&head_path),
       "a draft head of --model (a folder): write it instead, as the GGUF llama.cpp's speculative decoding reads "
       "(EAGLE-3 heads: architecture eagle3, for --spec-type draft-eagle3; DFlash drafts: architecture dflash, "
       "for --spec-type draft-dflash), with the model's tokenizer")
      ("name", po::value(&name), "general.name (default: the model's, or the head's, file or folder name)");
  po::variables_map vm;
  if (!parse_command_line(desc, argc, argv, "export-gguf", vm)) return 0;

  // Every option is checked before anything is loaded or written.
  const HeadFamily* family = head_path.empty() ? nullptr : &head_family_of(head_path);
  if (family && !family->export_gguf)
    throw Error("--head " + head_path + ": llama.cpp has no GGUF architecture for this family (" + family->title +
                "; b10256 reads EAGLE-3 heads, architecture eagle3, and DFlash drafts); nothing written");
  const GgmlType type = vm.count("type") ? parse_type(type_name) : stored_type(model_path, head_path);
  if (tokenizer_path.empty() && ends_with(model_path, ".gguf")) tokenizer_path = model_path;
  if (tokenizer_path.empty()) {
    if (!is_directory(model_path) || !is_file(model_path + "/tokenizer.json"))
      throw Error("--tokenizer: required for " + model_path + " (no tokenizer.json in a model folder to default to)");
    tokenizer_path = model_path + "/tokenizer.json";
  }
  if (name.empty()) name = base_name(head_path.empty() ? model_path : head_path);

  const auto model = LlamaModel::load(model_path, reference_options());  // float32: every stored value exactly
  const auto tokenizer = load_tokenizer(tokenizer_path);
  if (family)
    family->export_gguf(head_path, *model, *tokenizer, out, type, name);
  else
    export_gguf(*model, *tokenizer, out, type, name);
  std::fprintf(stderr, "wrote %s (%s, %s)\n", out.c_str(), ggml_type_name(type).c_str(), tokenizer_path.c_str());
  return 0;
}

}  // namespace draftlab::cli
