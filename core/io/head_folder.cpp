#include "core/io/head_folder.h"

#include <tuple>
#include <utility>

#include "core/base/error.h"
#include "core/base/file_bytes.h"

namespace draftlab {

std::string head_config_path(const std::string& path) {
  if (!is_file(path)) return path + "/config.json";
  const auto slash = path.find_last_of('/');
  return (slash == std::string::npos ? "." : path.substr(0, slash)) + "/config.json";
}

HeadFolder open_head_folder(const std::string& path, const std::string& title,
                            const std::vector<std::string>& weight_files, const std::string& torch_file) {
  HeadFolder f;
  if (is_file(path)) {
    f.weights = path;
  } else {
    std::string names;
    for (const auto& name : weight_files) names += (names.empty() ? "" : " or ") + name;
    if (!is_directory(path))
      throw Error::at(path, "not found (expected " + title + ": a folder with config.json and " + names +
                                ", or a .safetensors file with config.json beside it)");
    for (const auto& name : weight_files)
      if (f.weights.empty() && is_file(path + "/" + name)) f.weights = path + "/" + name;
    if (f.weights.empty() && is_file(path + "/" + torch_file))
      throw Error::at(path, "holds " + torch_file + " (torch.save) but no safetensors: convert it first with `draftlab "
                            "convert-head " + path + "/" + torch_file + " DIR`");
    if (f.weights.empty()) throw Error::at(path, "holds no " + names + " (" + title + ")");
  }
  f.config_path = head_config_path(path);
  f.config = read_head_config(f.config_path, title + " need config.json");
  return f;
}

nlohmann::json read_head_config(const std::string& config_path, const std::string& missing) {
  if (!is_file(config_path)) throw Error::at(config_path, "not found: " + missing);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(config_path));
  } catch (const nlohmann::json::exception& e) {
    throw Error::in_file(config_path, "config", "valid JSON", e.what());
  }
  if (!j.is_object()) throw Error::in_file(config_path, "config", "a JSON object", j.type_name());
  return j;
}

void check_head_fits_target(const std::string& config_path, int64_t hidden_size, int64_t vocab_size,
                            int64_t target_hidden_size, int64_t target_vocab_size) {
  for (const auto& [field, head, target] : {std::tuple<const char*, int64_t, int64_t>{"hidden_size", hidden_size,
                                                                                       target_hidden_size},
                                            {"vocab_size", vocab_size, target_vocab_size}})
    if (head != target)
      throw Error::in_file(config_path, field, std::string("the target's ") + field + " " + std::to_string(target),
                           std::to_string(head) + " (this head was trained for another model)");
}

int64_t head_config_int(const HeadFolder& folder, const std::string& key, int64_t min, int64_t fallback) {
  const nlohmann::json& j = folder.config;
  if (!j.contains(key) || j.at(key).is_null()) {
    if (fallback < min) throw Error::in_file(folder.config_path, key, "an integer >= " + std::to_string(min), "nothing");
    return fallback;
  }
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < min)
    throw Error::in_file(folder.config_path, key, "an integer >= " + std::to_string(min), v.dump());
  return v.get<int64_t>();
}

void check_head_sizes(const HeadFolder& folder, int64_t hidden_size, int64_t vocab_size) {
  // Heads only make sense on their target: the same feature width, the same vocabulary.
  for (const auto& [key, want] : {std::pair<std::string, int64_t>{"hidden_size", hidden_size}, {"vocab_size", vocab_size}})
    if (folder.config.contains(key) && !folder.config.at(key).is_null() && folder.config.at(key) != want)
      throw Error::in_file(folder.config_path, key, "the target's " + key + " " + std::to_string(want),
                           folder.config.at(key).dump() + " (these heads were trained for another model)");
}

}  // namespace draftlab
