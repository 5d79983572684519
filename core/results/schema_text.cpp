#include "core/results/schema_text.h"

#include "core/results/training_curves.h"

#include <cctype>
#include <sstream>

#include "core/base/error.h"
#include "core/results/results_schema.h"

namespace draftlab {

namespace {

std::string code(const std::string& s) { return "`" + s + "`"; }

// A table cell: '|' would end the cell.
std::string cell(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string attribute_table(const std::vector<AttributeSpec>& attributes, bool with_default) {
  std::ostringstream out;
  out << "| attribute | type | required | meaning |\n| --- | --- | --- | --- |\n";
  for (const AttributeSpec& a : attributes) {
    std::string required = a.presence == Presence::required ? "yes" : "no";
    if (with_default && a.presence == Presence::optional)
      required += a.default_value.empty() ? " (omitted when empty)" : " (default " + code(a.default_value) + ")";
    out << "| " << code(a.name) << " | " << a.type << " | " << required << " | " << cell(a.meaning) << " |\n";
  }
  return out.str();
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// with_default: optional attributes have a default a reader takes when absent (run attributes); else None.
std::string py_attributes(const std::string& name, const std::vector<AttributeSpec>& attributes, bool with_default) {
  std::ostringstream out;
  out << name << " = {\n";
  for (const AttributeSpec& a : attributes) {
    std::string default_value = "None";
    if (with_default && a.presence == Presence::optional)
      default_value = a.type == "string" ? python_literal(a.default_value) : a.default_value;
    out << "    " << python_literal(a.name) << ": Attribute(" << python_literal(a.type) << ", "
        << (a.presence == Presence::required ? "True" : "False") << ", " << default_value << ",\n"
        << "              " << python_literal(a.meaning) << "),\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace

std::string python_literal(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string schema_markdown() {
  std::ostringstream out;
  out << kSchemaMarkdownBegin << "\n\n";
  out << "Schema version: " << code(kResultsSchema) << ".\n\n";
  out << "### Root group `/`: attributes\n\n" << attribute_table(root_attribute_specs(), false) << "\n";
  out << "### `/runs/NNNN`: attributes\n\n" << attribute_table(run_attribute_specs(), true) << "\n";
  out << "Values of `draft_shape`:\n\n| draft_shape | meaning |\n| --- | --- |\n";
  for (const DraftShapeSpec& s : draft_shape_specs()) out << "| " << code(s.value) << " | " << cell(s.meaning) << " |\n";
  for (const TableSpec& t : run_table_specs()) {
    out << "\n### `/runs/NNNN/" << t.name << "/` (" << (t.presence == Presence::optional ? "optional: " : "")
        << t.meaning << ")\n\n";
    out << "| dataset | type | unit | meaning |\n| --- | --- | --- | --- |\n";
    for (const ColumnSpec& c : t.columns)
      out << "| " << code(c.name) << " | " << c.type << " | " << c.unit << " | " << cell(c.meaning) << " |\n";
  }
  out << "\n### `/training/LABEL/` (copies of training logs; core/results/training_curves.h)\n\n"
      << "| dataset | type | meaning |\n| --- | --- | --- |\n"
      << "| `train/step`, `train/loss`, `train/learning_rate` | int64, float64, float64 | one entry per optimisation step |\n"
      << "| `eval/step`, `eval/loss`, `eval/perplexity` | int64, float64, float64 | one entry per validation pass |\n";
  for (const TrainingMetric& m : training_metrics())
    out << "| " << code(std::string("eval/") + m.name) << " | float64 " << (m.single_value ? "[passes]" : "[passes, columns]")
        << " | " << cell(m.meaning) << " |\n";
  out << "\n" << kSchemaMarkdownEnd << "\n";
  return out.str();
}

std::string schema_python() {
  std::ostringstream out;
  out << "\"\"\"The draftlab results schema (docs/results-schema.md) as Python data.\n\n"
         "Generated from core/results/results_schema.h and analysis/experiment_catalog.cpp (EXPERIMENTS) by\n"
         "`draftlab schema --python --out analysis/results_schema.py`;\n"
         "do not edit (the analysis.schema_files test fails while this file differs from what draftlab prints).\n"
         "\"\"\"\n"
         "import collections\n\n"
         "Column = collections.namedtuple(\"Column\", \"type unit meaning\")\n"
         "Attribute = collections.namedtuple(\"Attribute\", \"type required default meaning\")\n\n"
      << "SCHEMA = " << python_literal(kResultsSchema) << "\n\n"
      << py_attributes("ROOT_ATTRIBUTES", root_attribute_specs(), false) << "\n"
      << py_attributes("RUN_ATTRIBUTES", run_attribute_specs(), true) << "\n";
  out << "REQUIRED_RUN_ATTRIBUTES = (";
  for (const AttributeSpec& a : run_attribute_specs())
    if (a.presence == Presence::required) out << python_literal(a.name) << ", ";
  out << ")\n\n";
  out << "# table -> column -> Column; the order is the order of the datasets in the file.\nTABLES = {\n";
  for (const TableSpec& t : run_table_specs()) {
    out << "    " << python_literal(t.name) << ": {\n";
    for (const ColumnSpec& c : t.columns)
      out << "        " << python_literal(c.name) << ": Column(" << python_literal(c.type) << ", " << python_literal(c.unit) << ",\n"
          << "                   " << python_literal(c.meaning) << "),\n";
    out << "    },\n";
  }
  out << "}\n\n# tables a run may lack (written only when they have rows)\nOPTIONAL_TABLES = (";
  for (const TableSpec& t : run_table_specs())
    if (t.presence == Presence::optional) out << python_literal(t.name) << ", ";
  out << ")\n\nTABLE_MEANINGS = {\n";
  for (const TableSpec& t : run_table_specs()) out << "    " << python_literal(t.name) << ": " << python_literal(t.meaning) << ",\n";
  out << "}\n\nDRAFT_SHAPES = {\n";
  for (const DraftShapeSpec& s : draft_shape_specs()) out << "    " << python_literal(s.value) << ": " << python_literal(s.meaning) << ",\n";
  out << "}\n";
  for (const DraftShapeSpec& s : draft_shape_specs())
    out << "DRAFT_SHAPE_" << upper(s.value) << " = " << python_literal(s.value) << "\n";
  out << "\n# eval/<metric> datasets of training logs and /training/LABEL groups: name -> (single_value, meaning)\n"
         "TRAINING_METRICS = {\n";
  for (const TrainingMetric& m : training_metrics())
    out << "    " << python_literal(m.name) << ": (" << (m.single_value ? "True" : "False") << ", " << python_literal(m.meaning) << "),\n";
  out << "}\n";
  return out.str();
}

std::string replace_generated_block(const std::string& document, const std::string& block, const std::string& path) {
  const size_t begin = document.find(kSchemaMarkdownBegin);
  if (begin == std::string::npos)
    throw Error::in_file(path, "generated schema block", std::string("a line ") + kSchemaMarkdownBegin, "none");
  const size_t end = document.find(kSchemaMarkdownEnd, begin);
  if (end == std::string::npos)
    throw Error::in_file(path, "generated schema block",
                         std::string("a line ") + kSchemaMarkdownEnd + " after the begin marker", "none");
  size_t after = end + std::string(kSchemaMarkdownEnd).size();
  if (after < document.size() && document[after] == '\n') ++after;
  return document.substr(0, begin) + block + document.substr(after);
}

}  // namespace draftlab
