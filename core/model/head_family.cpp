#include "core/model/head_family.h"

#include "core/base/error.h"
#include "core/base/file_bytes.h"

namespace draftlab {

const std::vector<const HeadFamily*>& head_family_table() {
#define DRAFTLAB_HEAD_FAMILY_ENTRY(file) &file##_family(),
  static const std::vector<const HeadFamily*> table{DRAFTLAB_HEAD_FAMILIES(DRAFTLAB_HEAD_FAMILY_ENTRY)};
#undef DRAFTLAB_HEAD_FAMILY_ENTRY
  return table;
}

std::string head_family_names() {
  std::string s;
  for (const HeadFamily* f : head_family_table()) s += (s.empty() ? "" : ", ") + f->name;
  return s;
}

const HeadFamily& find_head_family(const std::string& name) {
  for (const HeadFamily* f : head_family_table())
    if (f->name == name) return *f;
  throw Error("expected a head family (" + head_family_names() + "), got '" + name + "'");
}

const HeadFamily& head_family_of(const std::string& path) {
  const HeadFamily* fallback = nullptr;
  for (const HeadFamily* f : head_family_table())
    if (!f->recognises) fallback = f;
  check(fallback != nullptr, "head_family_of: no fallback family in DRAFTLAB_HEAD_FAMILIES");
  std::string dir = path;
  if (is_file(path)) {
    const auto slash = path.find_last_of('/');
    dir = slash == std::string::npos ? "." : path.substr(0, slash);
  }
  const std::string config_path = dir + "/config.json";
  if (!is_file(config_path)) return *fallback;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(config_path));
  } catch (const nlohmann::json::exception& e) {
    throw Error::in_file(config_path, "config", "valid JSON", e.what());
  }
  if (!j.is_object()) throw Error::in_file(config_path, "config", "a JSON object", j.type_name());
  for (const HeadFamily* f : head_family_table())
    if (f->recognises && f->recognises(j)) return *f;
  return *fallback;
}

}  // namespace draftlab
