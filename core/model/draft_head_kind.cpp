#include "core/model/draft_head_kind.h"

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"

namespace draftlab {

const char* draft_head_kind_name(DraftHeadKind kind) {
  switch (kind) {
    case DraftHeadKind::Eagle: return "eagle";
    case DraftHeadKind::Medusa: return "medusa";
    case DraftHeadKind::Hydra: return "hydra";
  }
  return "?";
}

const char* draft_head_kind_title(DraftHeadKind kind) {
  switch (kind) {
    case DraftHeadKind::Eagle: return "EAGLE head";
    case DraftHeadKind::Medusa: return "Medusa heads";
    case DraftHeadKind::Hydra: return "Hydra heads";
  }
  return "?";
}

DraftHeadKind parse_draft_head_kind(const std::string& name) {
  for (DraftHeadKind k : {DraftHeadKind::Eagle, DraftHeadKind::Medusa, DraftHeadKind::Hydra})
    if (name == draft_head_kind_name(k)) return k;
  throw Error("expected a head kind (eagle, medusa, hydra), got '" + name + "'");
}

DraftHeadKind draft_head_kind(const std::string& path) {
  std::string dir = path;
  if (is_file(path)) {
    const auto slash = path.find_last_of('/');
    dir = slash == std::string::npos ? "." : path.substr(0, slash);
  }
  const std::string config_path = dir + "/config.json";
  if (!is_file(config_path)) return DraftHeadKind::Eagle;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(config_path));
  } catch (const nlohmann::json::exception& e) {
    throw Error::in_file(config_path, "config", "valid JSON", e.what());
  }
  if (!j.is_object()) throw Error::in_file(config_path, "config", "a JSON object", j.type_name());
  if (j.contains("medusa_num_heads")) return DraftHeadKind::Medusa;
  if (j.contains("hydra_num_heads")) return DraftHeadKind::Hydra;
  return DraftHeadKind::Eagle;
}

}  // namespace draftlab
