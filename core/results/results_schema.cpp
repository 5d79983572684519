#include "core/results/results_schema.h"

#include <sstream>
#include <stdexcept>

namespace draftlab {

namespace {

std::string default_text(const std::string& v) { return v; }
template <typename T>
std::string default_text(T v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

std::vector<AttributeSpec> root_attribute_specs() {
#define DRAFTLAB_ROOT_STRING_SPEC(name, presence, meaning) \
  {#name, schema_type_name<std::string>(), "", Presence::presence, meaning},
#define DRAFTLAB_ROOT_INT_SPEC(name, default_value, presence, meaning) \
  {#name, schema_type_name<int64_t>(), "", Presence::presence, meaning},
  return {DRAFTLAB_ROOT_ATTRIBUTES(DRAFTLAB_ROOT_STRING_SPEC, DRAFTLAB_ROOT_INT_SPEC)};
#undef DRAFTLAB_ROOT_INT_SPEC
#undef DRAFTLAB_ROOT_STRING_SPEC
}

std::vector<AttributeSpec> run_attribute_specs() {
#define DRAFTLAB_RUN_ATTRIBUTE_SPEC(field, name, type, default_value, presence, meaning)                          \
  {name, schema_type_name<type>(),                                                                               \
   Presence::presence == Presence::optional ? default_text(type(default_value)) : std::string(), Presence::presence, \
   meaning},
  return {DRAFTLAB_RUN_ATTRIBUTES(DRAFTLAB_RUN_ATTRIBUTE_SPEC)};
#undef DRAFTLAB_RUN_ATTRIBUTE_SPEC
}

std::vector<TableSpec> run_table_specs() {
#define DRAFTLAB_COLUMN_SPEC(name, type, unit, meaning) {#name, schema_type_name<type>(), unit, meaning},
#define DRAFTLAB_TABLE_SPEC(member, Rows, COLUMNS, presence, meaning) \
  {#member, meaning, {COLUMNS(DRAFTLAB_COLUMN_SPEC)}, Presence::presence},
  return {DRAFTLAB_RUN_TABLES(DRAFTLAB_TABLE_SPEC)};
#undef DRAFTLAB_TABLE_SPEC
#undef DRAFTLAB_COLUMN_SPEC
}

Presence run_table_presence(const std::string& name) {
  static const std::vector<TableSpec> specs = run_table_specs();  // asked per run and table by readers and writers
  for (const TableSpec& t : specs)
    if (t.name == name) return t.presence;
  throw std::logic_error("results schema: no run table " + name);
}

std::vector<DraftShapeSpec> draft_shape_specs() {
#define DRAFTLAB_DRAFT_SHAPE_SPEC(value, meaning) {#value, meaning},
  return {DRAFTLAB_DRAFT_SHAPES(DRAFTLAB_DRAFT_SHAPE_SPEC)};
#undef DRAFTLAB_DRAFT_SHAPE_SPEC
}

bool is_draft_shape(const std::string& value) {
  for (const DraftShapeSpec& s : draft_shape_specs())
    if (s.value == value) return true;
  return false;
}

}  // namespace draftlab
