#include "strategies/head_family.h"

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/head_folder.h"
#include "strategies/registry.h"

namespace draftlab {

const OptionSpec* HeadFamily::training_option(const std::string& key) const {
  for (const auto& o : training_options)
    if (o.key == key) return &o;
  return nullptr;
}

const std::vector<const HeadFamily*>& head_family_table() {
  static const std::vector<const HeadFamily*> table = [] {
    std::vector<const HeadFamily*> t;
    for (const DraftFamily* f : draft_family_table())
      if (f->heads) t.push_back(f->heads);
    return t;
  }();
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
  check(fallback != nullptr, "head_family_of: no fallback head family in DRAFTLAB_FAMILIES");
  const std::string config_path = head_config_path(path);
  if (!is_file(config_path)) return *fallback;
  const nlohmann::json j = read_head_config(config_path, "a head folder needs config.json");
  for (const HeadFamily* f : head_family_table())
    if (f->recognises && f->recognises(j)) return *f;
  return *fallback;
}

void check_head_path(const HeadFamily& family, const std::string& path) {
  if (!is_file(path) && !is_directory(path))
    throw Error::at(path, "not found (expected " + family.title + ": a folder, or its weights file)");
  const HeadFamily& found = head_family_of(path);
  // Without a config.json nothing says which family it is: the loader names what is missing.
  if (&found != &family && is_file(head_config_path(path)))
    throw Error("option head=" + path + ": a " + found.title + ", but this strategy drafts with " + family.title +
                " (run it with -s " + found.tree_strategy + ")");
}

}  // namespace draftlab
