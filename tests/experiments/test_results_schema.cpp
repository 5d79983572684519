// The schema declaration (core/results/results_schema.h) is what reaches the file: every declared column is a
// dataset of the declared type and nothing else is; every declared run attribute is written (optional ones
// only when non-empty); the Markdown/Python text lists them all; the docs block is replaced in place.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "core/results/results_file.h"
#include "core/results/results_schema.h"
#include "core/results/schema_text.h"
#include "test_errors.h"
#include "test_paths.h"

namespace draftlab {
namespace {

// One question with one cycle of one node: every table has a row.
ResultsFile one_run_file(const std::string& grid_json) {
  ResultsFile f;
  f.attributes = {{"experiment", "speed"}};
  RunRecord r;
  r.method = "m";
  r.strategy = "s";
  r.draft_shape = draft_shapes::chain;
  r.dataset = "d";
  r.grid_json = grid_json;
  r.questions.for_each_column([](const char*, auto& column) { column.resize(1); });
  r.cycles.for_each_column([](const char*, auto& column) { column.resize(1); });
  r.nodes.for_each_column([](const char*, auto& column) { column.resize(1); });
  r.oracle.for_each_column([](const char*, auto& column) { column.resize(1); });
  r.questions.cycles[0] = 1;
  r.cycles.drafted[0] = 1;
  r.cycles.accept_length[0] = 1;
  r.nodes.tree_index[0] = 1;
  f.runs.push_back(r);
  return f;
}

std::string type_name_of(const H5::DataSet& set) {
  const H5::DataType t = set.getDataType();
  switch (set.getTypeClass()) {
    case H5T_STRING: return "string";
    case H5T_FLOAT: return t.getSize() == 4 ? "float32" : "float64";
    case H5T_INTEGER: return "int" + std::to_string(8 * t.getSize());
    default: return "other";
  }
}

TEST(ResultsSchema, EveryDeclaredColumnIsADatasetOfItsTypeAndNothingElse) {
  const std::string dir = testing::temp_dir() + "/schema-columns";
  std::filesystem::create_directories(dir);
  write_results(dir + "/r.h5", one_run_file(""));
  H5::H5File file(dir + "/r.h5", H5F_ACC_RDONLY);
  for (const TableSpec& t : run_table_specs()) {
    H5::Group g = file.openGroup("/runs/0000/" + t.name);
    ASSERT_EQ(g.getNumObjs(), t.columns.size()) << t.name;
    for (const ColumnSpec& c : t.columns)
      EXPECT_EQ(type_name_of(g.openDataSet(c.name)), c.type) << t.name << "/" << c.name;
  }
  // An optional table without rows is not written; the reader gives it back empty.
  ResultsFile without = one_run_file("");
  without.runs[0].oracle = OracleRows{};
  write_results(dir + "/r0.h5", without);
  H5::H5File f0(dir + "/r0.h5", H5F_ACC_RDONLY);
  for (const TableSpec& t : run_table_specs())
    EXPECT_EQ(H5Lexists(f0.openGroup("/runs/0000").getId(), t.name.c_str(), H5P_DEFAULT) > 0,
              t.presence == Presence::required)
        << t.name;
  EXPECT_EQ(read_results(dir + "/r0.h5").runs[0].oracle.size(), 0u);
}

TEST(ResultsSchema, RunAttributesAreTheDeclaredOnesOptionalOnlyWhenSet) {
  const std::string dir = testing::temp_dir() + "/schema-attributes";
  std::filesystem::create_directories(dir);
  for (const std::string grid : {"", R"({"index": 0})"}) {
    write_results(dir + "/r.h5", one_run_file(grid));
    H5::H5File file(dir + "/r.h5", H5F_ACC_RDONLY);
    H5::Group g = file.openGroup("/runs/0000");
    std::set<std::string> want, got;
    for (const AttributeSpec& a : run_attribute_specs())
      // shard and batch_size are always written (their defaults say something); grid only for sweeps.
      if (a.presence == Presence::required || a.name == "shard" || a.name == "batch_size" || !grid.empty())
        want.insert(a.name);
    for (int i = 0; i < g.getNumAttrs(); ++i) got.insert(g.openAttribute(static_cast<unsigned>(i)).getName());
    EXPECT_EQ(got, want) << "grid '" << grid << "'";
    EXPECT_EQ(read_results(dir + "/r.h5").runs[0].grid_json, grid);
  }
}

TEST(ResultsSchema, SpecsListEveryTableColumnAndDraftShape) {
  const std::vector<TableSpec> tables = run_table_specs();
  ASSERT_EQ(tables.size(), 4u);
  EXPECT_EQ(tables[0].name, "questions");
  EXPECT_EQ(tables[3].name, "oracle");
  EXPECT_EQ(tables[3].presence, Presence::optional);
  EXPECT_EQ(tables[0].presence, Presence::required);
  EXPECT_EQ(tables[0].columns.size(), 12u);
  EXPECT_EQ(tables[1].columns.size(), 7u);
  EXPECT_EQ(tables[2].columns[5].name, "confidence");
  EXPECT_EQ(tables[2].columns[5].type, "float32");
  EXPECT_EQ(draft_shape_specs().size(), 4u);
  EXPECT_TRUE(is_draft_shape("static_tree"));
  EXPECT_FALSE(is_draft_shape("static-tree"));
  EXPECT_EQ(std::string(draft_shapes::dynamic_tree), "dynamic_tree");
}

TEST(SchemaText, MarkdownAndPythonNameEveryColumnAndAttribute) {
  const std::string md = schema_markdown(), py = schema_python();
  EXPECT_EQ(md.rfind(kSchemaMarkdownBegin, 0), 0u);
  EXPECT_NE(md.find(std::string(kSchemaMarkdownEnd) + "\n"), std::string::npos);
  EXPECT_NE(py.find(std::string("SCHEMA = \"") + kResultsSchema + "\""), std::string::npos);
  for (const TableSpec& t : run_table_specs())
    for (const ColumnSpec& c : t.columns) {
      EXPECT_NE(md.find("| `" + c.name + "` | " + c.type + " |"), std::string::npos) << c.name;
      EXPECT_NE(py.find("\"" + c.name + "\": Column(\"" + c.type + "\""), std::string::npos) << c.name;
    }
  for (const AttributeSpec& a : run_attribute_specs())
    EXPECT_NE(md.find("| `" + a.name + "` | " + a.type + " |"), std::string::npos) << a.name;
  EXPECT_NE(py.find("DRAFT_SHAPE_STATIC_TREE = \"static_tree\""), std::string::npos);
  // Quotes in meanings are escaped for Python.
  EXPECT_NE(py.find("(`{\\\"total_tokens\\\""), std::string::npos);
}

TEST(SchemaText, ReplaceGeneratedBlockKeepsTheProseAround) {
  const std::string block = std::string(kSchemaMarkdownBegin) + "\nnew\n" + kSchemaMarkdownEnd + "\n";
  const std::string doc = std::string("# Title\n\nbefore\n") + kSchemaMarkdownBegin + "\nold\n" + kSchemaMarkdownEnd +
                          "\nafter\n";
  EXPECT_EQ(replace_generated_block(doc, block, "d.md"), "# Title\n\nbefore\n" + block + "after\n");
  testing::expect_error([] { replace_generated_block("# no markers\n", "x", "docs/d.md"); },
                        {"docs/d.md", kSchemaMarkdownBegin});
  testing::expect_error(
      [] { replace_generated_block(std::string(kSchemaMarkdownBegin) + "\n", "x", "docs/d.md"); },
      {"docs/d.md", kSchemaMarkdownEnd});
}

}  // namespace
}  // namespace draftlab
