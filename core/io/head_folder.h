// What the parallel-head folders (Medusa, Hydra) share on disk: a folder with config.json and one safetensors
// file, or the weights file itself with config.json beside it. The kinds differ only in file names and fields.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace draftlab {

struct HeadFolder {
  std::string weights;      // the safetensors file
  std::string config_path;  // dir/config.json
  nlohmann::json config;    // its contents, a JSON object
};

// Where the config.json of a head given as a folder, or as a weights file inside one, is.
std::string head_config_path(const std::string& path);

// A head's config.json, parsed: a JSON object. Throws Error naming the file when it is missing (`missing`: what to
// say, e.g. "an EAGLE head needs config.json"), not JSON or not an object.
nlohmann::json read_head_config(const std::string& config_path, const std::string& missing);

// A head only makes sense on top of its target: same feature width, same vocabulary. Throws Error naming
// config_path and the field (hidden_size, vocab_size) that differs.
void check_head_fits_target(const std::string& config_path, int64_t hidden_size, int64_t vocab_size,
                            int64_t target_hidden_size, int64_t target_vocab_size);

// Finds the weights (the path itself when it is a file, else the first of `weight_files` present in the folder) and
// reads config.json. `torch_file`: the name of the kind's torch.save() checkpoint, for a hint to convert it. Throws
// Error naming the path and what was expected (`title`, e.g. "Medusa heads").
HeadFolder open_head_folder(const std::string& path, const std::string& title,
                            const std::vector<std::string>& weight_files, const std::string& torch_file);

// An integer field >= min; `fallback` when absent or null (fallback < min: the field is required). Throws Error
// naming the file, the field and the expected value.
int64_t head_config_int(const HeadFolder& folder, const std::string& key, int64_t min, int64_t fallback);

// Throws Error when config.json gives hidden_size or vocab_size other than the target's.
void check_head_sizes(const HeadFolder& folder, int64_t hidden_size, int64_t vocab_size);

}  // namespace draftlab
