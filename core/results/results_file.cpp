#include "core/results/results_file.h"

#include <H5Cpp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <type_traits>

#include "core/base/error.h"
#include "core/results/hdf5_safe_read.h"
#include "core/base/file_bytes.h"

namespace draftlab {

namespace {

// For DRAFTLAB_ROOT_ATTRIBUTES(S, I) where only the integer attributes (ResultsFile members) matter.
#define DRAFTLAB_NO_STRING(name, presence, meaning)

// ---- HDF5 types: little-endian in the file, native in memory -------------------------------------------------

// The HDF5 types of a numeric schema type (results_schema.h), chosen by its class and size.
template <typename T>
struct H5Type {
  static_assert(std::is_arithmetic_v<T> && (sizeof(T) == 1 || sizeof(T) == 4 || sizeof(T) == 8),
                "not a numeric type of the results schema");
  static constexpr bool is_float = std::is_floating_point_v<T>;
  static constexpr H5T_class_t cls = is_float ? H5T_FLOAT : H5T_INTEGER;
  static H5::PredType file() {
    if constexpr (is_float) return sizeof(T) == 4 ? H5::PredType::IEEE_F32LE : H5::PredType::IEEE_F64LE;
    else return sizeof(T) == 1 ? H5::PredType::STD_I8LE : sizeof(T) == 4 ? H5::PredType::STD_I32LE : H5::PredType::STD_I64LE;
  }
  static H5::PredType mem() {
    if constexpr (is_float) return sizeof(T) == 4 ? H5::PredType::NATIVE_FLOAT : H5::PredType::NATIVE_DOUBLE;
    else return sizeof(T) == 1 ? H5::PredType::NATIVE_INT8 : sizeof(T) == 4 ? H5::PredType::NATIVE_INT32 : H5::PredType::NATIVE_INT64;
  }
};

H5::StrType utf8_string_type() {
  H5::StrType t(H5::PredType::C_S1, H5T_VARIABLE);
  t.setCset(H5T_CSET_UTF8);
  return t;
}

std::string run_name(size_t index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04zu", index);
  return buf;
}

bool link_exists(const H5::Group& g, const std::string& name) {
  return H5Lexists(g.getId(), name.c_str(), H5P_DEFAULT) > 0;
}

// ---- writing ------------------------------------------------------------------------------------------------

template <typename T>
void write_column(H5::Group& g, const std::string& name, const std::vector<T>& values) {
  const hsize_t dims[1] = {values.size()};
  H5::DataSpace space(1, dims);
  H5::DataSet set = g.createDataSet(name, H5Type<T>::file(), space);
  if (!values.empty()) set.write(values.data(), H5Type<T>::mem());
}

void write_column(H5::Group& g, const std::string& name, const std::vector<std::string>& values) {
  std::vector<const char*> ptrs;
  ptrs.reserve(values.size());
  for (const auto& s : values) ptrs.push_back(s.c_str());
  const hsize_t dims[1] = {values.size()};
  H5::DataSpace space(1, dims);
  const H5::StrType type = utf8_string_type();
  H5::DataSet set = g.createDataSet(name, type, space);
  if (!values.empty()) set.write(ptrs.data(), type);
}

void write_attr(H5::H5Object& obj, const std::string& name, const std::string& value) {
  const H5::StrType type = utf8_string_type();
  H5::Attribute a = obj.createAttribute(name, type, H5::DataSpace(H5S_SCALAR));
  a.write(type, value);
}

template <typename T>
void write_attr(H5::H5Object& obj, const std::string& name, T value) {
  H5::Attribute a = obj.createAttribute(name, H5Type<T>::file(), H5::DataSpace(H5S_SCALAR));
  a.write(H5Type<T>::mem(), &value);
}

bool is_empty_string(const std::string& v) { return v.empty(); }
template <typename T>
bool is_empty_string(const T&) { return false; }

void write_run(H5::Group& runs, size_t index, const RunRecord& r) {
  H5::Group g = runs.createGroup(run_name(index));
  r.for_each_attribute([&](const char* name, Presence presence, const auto& value) {
    if (presence == Presence::required || !is_empty_string(value)) write_attr(g, name, value);
  });
  r.for_each_table([&](const char* table, const auto& rows) {
    if (run_table_presence(table) == Presence::optional && rows.size() == 0) return;
    H5::Group t = g.createGroup(table);
    rows.for_each_column([&](const char* name, const auto& column) { write_column(t, name, column); });
  });
}

void write_training(H5::Group& parent, const std::string& label, const TrainingCurves& t) {
  H5::Group g = parent.createGroup(label);
  write_training_group(g, t);
}

// ---- validation ---------------------------------------------------------------------------------------------

void check_length(const std::string& source, const std::string& table, const std::string& column, size_t got,
                  size_t want, const std::string& first_column) {
  if (got != want)
    throw Error::in_file(source, table + "/" + column,
                         std::to_string(want) + " rows (like " + table + "/" + first_column + ")",
                         std::to_string(got) + " rows");
}

// Every column of the table as long as its first one.
template <class Rows>
void check_lengths(const Rows& rows, const std::string& source, const std::string& table) {
  const char* first = nullptr;
  rows.for_each_column([&](const char* name, const auto& column) {
    if (!first) first = name;
    check_length(source, table, name, column.size(), rows.size(), first);
  });
}

void validate_run(const RunRecord& r, const std::string& source, const std::string& where) {
  r.for_each_attribute([&](const char* name, Presence presence, const auto& value) {
    if (presence == Presence::required && is_empty_string(value))
      throw Error::in_file(source, where + " attribute " + name, "a non-empty string", "\"\"");
  });
  if (r.batch_size < 1)
    throw Error::in_file(source, where + " attribute batch_size", "an integer >= 1", std::to_string(r.batch_size));
  if (!is_draft_shape(r.draft_shape)) {
    std::string shapes;
    for (const DraftShapeSpec& s : draft_shape_specs()) shapes += (shapes.empty() ? "" : ", ") + s.value;
    throw Error::in_file(source, where + " attribute draft_shape", "one of " + shapes, "'" + r.draft_shape + "'");
  }
  r.for_each_table([&](const char* table, const auto& rows) { check_lengths(rows, source, where + "/" + table); });

  const QuestionRows& q = r.questions;
  const CycleRows& c = r.cycles;
  const NodeRows& n = r.nodes;
  const std::string qt = where + "/questions", ct = where + "/cycles", nt = where + "/nodes";
  const size_t nq = q.size(), nc = c.size(), nn = n.size();

  // questions -> cycles: contiguous blocks in order, each cycle pointing back at its question.
  int64_t next_cycle = 0;
  for (size_t i = 0; i < nq; ++i) {
    const std::string row = "[" + std::to_string(i) + "]";
    if (q.cycle_offset[i] != next_cycle)
      throw Error::in_file(source, qt + "/cycle_offset" + row, std::to_string(next_cycle) + " (the previous question's "
                           "offset + cycles)", std::to_string(q.cycle_offset[i]));
    if (q.cycles[i] < 0 || next_cycle + q.cycles[i] > static_cast<int64_t>(nc))
      throw Error::in_file(source, qt + "/cycles" + row,
                           "a count in [0, " + std::to_string(static_cast<int64_t>(nc) - next_cycle) + "] (rows left in cycles/)",
                           std::to_string(q.cycles[i]));
    for (int64_t j = next_cycle; j < next_cycle + q.cycles[i]; ++j)
      if (c.question[j] != static_cast<int32_t>(i))
        throw Error::in_file(source, ct + "/question[" + std::to_string(j) + "]", std::to_string(i),
                             std::to_string(c.question[j]));
    next_cycle += q.cycles[i];
    if (q.identical[i] < -1 || q.identical[i] > 1)
      throw Error::in_file(source, qt + "/identical" + row, "-1, 0 or 1", std::to_string(q.identical[i]));
  }
  if (next_cycle != static_cast<int64_t>(nc))
    throw Error::in_file(source, ct, std::to_string(next_cycle) + " rows (the sum of questions/cycles)",
                         std::to_string(nc) + " rows");

  // cycles -> nodes, the same way.
  int64_t next_node = 0;
  for (size_t j = 0; j < nc; ++j) {
    const std::string row = "[" + std::to_string(j) + "]";
    if (c.node_offset[j] != next_node)
      throw Error::in_file(source, ct + "/node_offset" + row,
                           std::to_string(next_node) + " (the previous cycle's offset + drafted)",
                           std::to_string(c.node_offset[j]));
    if (c.drafted[j] < 0 || next_node + c.drafted[j] > static_cast<int64_t>(nn))
      throw Error::in_file(source, ct + "/drafted" + row,
                           "a count in [0, " + std::to_string(static_cast<int64_t>(nn) - next_node) + "] (rows left in nodes/)",
                           std::to_string(c.drafted[j]));
    if (c.accept_length[j] < 1 || c.accept_length[j] > c.drafted[j] + 1)
      throw Error::in_file(source, ct + "/accept_length" + row, "in [1, drafted + 1 = " + std::to_string(c.drafted[j] + 1) + "]",
                           std::to_string(c.accept_length[j]));
    for (int64_t k = next_node; k < next_node + c.drafted[j]; ++k) {
      if (n.cycle[k] != static_cast<int64_t>(j))
        throw Error::in_file(source, nt + "/cycle[" + std::to_string(k) + "]", std::to_string(j),
                             std::to_string(n.cycle[k]));
      if (n.parent[k] < 0 || n.parent[k] >= n.tree_index[k])
        throw Error::in_file(source, nt + "/parent[" + std::to_string(k) + "]",
                             "in [0, tree_index = " + std::to_string(n.tree_index[k]) + ") (parents come first)",
                             std::to_string(n.parent[k]));
    }
    next_node += c.drafted[j];
  }
  if (next_node != static_cast<int64_t>(nn))
    throw Error::in_file(source, nt, std::to_string(next_node) + " rows (the sum of cycles/drafted)",
                         std::to_string(nn) + " rows");

  // oracle: questions in order, positions counting up within each, matched within the draft.
  const OracleRows& o = r.oracle;
  const std::string ot = where + "/oracle";
  for (size_t k = 0; k < o.size(); ++k) {
    const std::string row = "[" + std::to_string(k) + "]";
    const bool first = k == 0 || o.question[k] != o.question[k - 1];
    if (o.question[k] < 0 || o.question[k] >= static_cast<int32_t>(nq) || (k > 0 && o.question[k] < o.question[k - 1]))
      throw Error::in_file(source, ot + "/question" + row,
                           "a row of questions/ (< " + std::to_string(nq) + "), not below the previous row's",
                           std::to_string(o.question[k]));
    const int32_t want = first ? 0 : o.position[k - 1] + 1;
    if (o.position[k] != want)
      throw Error::in_file(source, ot + "/position" + row, std::to_string(want), std::to_string(o.position[k]));
    if (o.matched[k] < 0 || o.matched[k] > o.drafted[k])
      throw Error::in_file(source, ot + "/matched" + row, "in [0, drafted = " + std::to_string(o.drafted[k]) + "]",
                           std::to_string(o.matched[k]));
  }
}

void validate_root(const ResultsFile& results, const std::string& source) {
  auto it = results.attributes.find("schema");
  if (it != results.attributes.end() && it->second != kResultsSchema)
    throw Error::in_file(source, "attribute schema", kResultsSchema, "'" + it->second + "'");
  for (const AttributeSpec& a : root_attribute_specs()) {
    // schema may be left out in memory: the writer writes kResultsSchema. Integer ones are members.
    if (a.presence != Presence::required || a.type != "string" || a.name == "schema") continue;
    it = results.attributes.find(a.name);
    if (it == results.attributes.end() || it->second.empty())
      throw Error::in_file(source, "attribute " + a.name, "a non-empty string (" + a.meaning + ")", "none");
  }
  for (const auto& [label, t] : results.training) {
    if (label.empty() || label.find('/') != std::string::npos)
      throw Error::in_file(source, "/training/" + label, "a label without '/'", "'" + label + "'");
    t.validate(source, "/training/" + label + "/");
  }
}

// The writer only writes root attributes the schema declares, so docs/results-schema.md lists every one.
void check_root_attributes_declared(const ResultsFile& results, const std::string& path) {
  std::string declared;
  for (const AttributeSpec& a : root_attribute_specs())
    if (a.type == "string") declared += (declared.empty() ? "" : ", ") + a.name;
  for (const auto& [key, value] : results.attributes)
    if ((", " + declared + ",").find(", " + key + ",") == std::string::npos)
      throw Error::in_file(path, "attribute " + key,
                           "a root attribute of core/results/results_schema.h (" + declared + ")", "'" + key + "'");
}

// ---- reading ------------------------------------------------------------------------------------------------

struct Reader {
  std::string path;

  H5::Group group(const H5::Group& parent, const std::string& name, const std::string& where) const {
    if (!link_exists(parent, name)) throw Error::in_file(path, where + "/" + name, "a group", "none (missing)");
    return parent.openGroup(name);
  }

  H5::DataSet dataset(const H5::Group& g, const std::string& name, const std::string& where, H5T_class_t cls,
                      const char* type_name, size_t bytes) const {
    const std::string field = where + "/" + name;
    if (!link_exists(g, name)) throw Error::in_file(path, field, std::string("a ") + type_name + " dataset", "none (missing)");
    H5::DataSet set = g.openDataSet(name);
    const H5::DataType t = set.getDataType();
    if (set.getTypeClass() != cls || (bytes > 0 && t.getSize() != bytes))
      throw Error::in_file(path, field, type_name, "a dataset of another type (class " +
                                                       std::to_string(static_cast<int>(set.getTypeClass())) +
                                                       ", " + std::to_string(t.getSize()) + " bytes)");
    return set;
  }

  static hsize_t rows(const H5::DataSet& set, int rank, hsize_t* second = nullptr) {
    H5::DataSpace space = set.getSpace();
    hsize_t dims[2] = {0, 0};
    if (space.getSimpleExtentNdims() != rank) return static_cast<hsize_t>(-1);
    space.getSimpleExtentDims(dims);
    if (second) *second = dims[1];
    return dims[0];
  }

  template <typename T>
  std::vector<T> column(const H5::Group& g, const std::string& name, const std::string& where) const {
    if constexpr (std::is_same_v<T, std::string>) {
      return strings(g, name, where);
    } else {
      H5::DataSet set = dataset(g, name, where, H5Type<T>::cls, schema_type_name<T>(), sizeof(T));
      std::vector<T> values(rows_1d(set, name, where));  // stored rows only (rows_1d)
      if (!values.empty()) set.read(values.data(), H5Type<T>::mem());
      return values;
    }
  }

  hsize_t rows_1d(const H5::DataSet& set, const std::string& name, const std::string& where) const {
    const hsize_t n = rows(set, 1);
    if (n == static_cast<hsize_t>(-1)) throw Error::in_file(path, where + "/" + name, "a 1-D dataset", "another rank");
    check_values_stored(set, n, path, where + "/" + name);
    return n;
  }

  std::vector<std::string> strings(const H5::Group& g, const std::string& name, const std::string& where) const {
    H5::DataSet set = dataset(g, name, where, H5T_STRING, "string", 0);
    if (!set.getStrType().isVariableStr())
      throw Error::in_file(path, where + "/" + name, "variable-length strings", "fixed-length strings");
    const hsize_t n = rows_1d(set, name, where);
    std::vector<std::string> out(n);
    if (n == 0) return out;
    std::vector<char*> buf(n, nullptr);
    const H5::StrType type = utf8_string_type();
    set.read(buf.data(), type);
    for (hsize_t i = 0; i < n; ++i) out[i] = buf[i] ? buf[i] : "";
    H5::DataSpace space = set.getSpace();
    H5Dvlen_reclaim(type.getId(), space.getId(), H5P_DEFAULT, buf.data());
    return out;
  }

  H5::Attribute attribute(const H5::H5Object& obj, const std::string& name, const std::string& where, H5T_class_t cls,
                          const char* type_name) const {
    const std::string field = where + " attribute " + name;
    if (H5Aexists(obj.getId(), name.c_str()) <= 0) throw Error::in_file(path, field, type_name, "none (missing)");
    H5::Attribute a = obj.openAttribute(name);
    if (a.getTypeClass() != cls) throw Error::in_file(path, field, type_name, "an attribute of another type");
    check_single_value(a, path, field, type_name);  // read into one value below
    return a;
  }

  std::string string_attr(const H5::H5Object& obj, const std::string& name, const std::string& where) const {
    return read_string_attribute(attribute(obj, name, where, H5T_STRING, "a string"), path,
                                 where + " attribute " + name);
  }

  int64_t int_attr(const H5::H5Object& obj, const std::string& name, const std::string& where) const {
    H5::Attribute a = attribute(obj, name, where, H5T_INTEGER, "an integer");
    int64_t v = 0;
    a.read(H5::PredType::NATIVE_INT64, &v);
    return v;
  }

  double double_attr(const H5::H5Object& obj, const std::string& name, const std::string& where) const {
    H5::Attribute a = attribute(obj, name, where, H5T_FLOAT, "a float");
    double v = 0;
    a.read(H5::PredType::NATIVE_DOUBLE, &v);
    return v;
  }

  // Every string attribute of obj, by name.
  std::map<std::string, std::string> all_string_attrs(const H5::H5Object& obj) const {
    std::map<std::string, std::string> out;
    for (int i = 0; i < obj.getNumAttrs(); ++i) {
      H5::Attribute a = obj.openAttribute(static_cast<unsigned>(i));
      if (a.getTypeClass() != H5T_STRING) continue;
      out[a.getName()] = read_string_attribute(a, path, "attribute " + a.getName());
    }
    return out;
  }

  template <typename T>
  T attr(const H5::H5Object& obj, const std::string& name, const std::string& where) const {
    if constexpr (std::is_same_v<T, std::string>) return string_attr(obj, name, where);
    else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(double_attr(obj, name, where));
    else return static_cast<T>(int_attr(obj, name, where));
  }

  RunRecord run(const H5::Group& g, const std::string& where) const {
    RunRecord r;
    r.for_each_attribute([&](const char* name, Presence presence, auto& value) {
      if (presence == Presence::optional && H5Aexists(g.getId(), name) <= 0) return;  // keeps the default
      value = attr<std::decay_t<decltype(value)>>(g, name, where);
    });
    r.for_each_table([&](const char* table, auto& rows) {
      if (run_table_presence(table) == Presence::optional && H5Lexists(g.getId(), table, H5P_DEFAULT) <= 0) return;
      const H5::Group t = group(g, table, where);
      rows.for_each_column([&](const char* name, auto& column) {
        column = this->column<typename std::decay_t<decltype(column)>::value_type>(t, name, where + "/" + table);
      });
    });
    return r;
  }
};

// Opens an HDF5 file for reading with a clear error when it is missing or not HDF5.
H5::H5File open_for_reading(const std::string& path) {
  H5::Exception::dontPrint();
  if (access(path.c_str(), R_OK) != 0) throw Error::at(path, "cannot open (no such file or not readable)");
  if (H5Fis_hdf5(path.c_str()) <= 0) throw Error::at(path, "not an HDF5 file");
  return H5::H5File(path, H5F_ACC_RDONLY);
}

}  // namespace

void validate_results(const ResultsFile& results, const std::string& source) {
  validate_root(results, source);
  for (size_t i = 0; i < results.runs.size(); ++i) validate_run(results.runs[i], source, "/runs/" + run_name(i));
}

void write_results(const std::string& path, const ResultsFile& results) {
  validate_root(results, path);
  check_root_attributes_declared(results, path);
  write_through_temporary(path, [&](const std::string& tmp) {
    try {
      H5::Exception::dontPrint();  // errors become our Error below, not a stack dump on stderr
      H5::H5File file(tmp, H5F_ACC_TRUNC);
      H5::Group root = file.openGroup("/");
      write_attr(root, "schema", std::string(kResultsSchema));
      for (const auto& [key, value] : results.attributes)
        if (key != "schema") write_attr(root, key, value);
#define DRAFTLAB_WRITE_ROOT_INT(name, default_value, presence, meaning) write_attr(root, #name, results.name);
      DRAFTLAB_ROOT_ATTRIBUTES(DRAFTLAB_NO_STRING, DRAFTLAB_WRITE_ROOT_INT)
#undef DRAFTLAB_WRITE_ROOT_INT
      H5::Group runs = file.createGroup("/runs");
      for (size_t i = 0; i < results.runs.size(); ++i) {
        // Checked run by run as it is written: a bad run found late still leaves no file behind.
        validate_run(results.runs[i], path, "/runs/" + run_name(i));
        write_run(runs, i, results.runs[i]);
      }
      if (!results.training.empty()) {
        H5::Group training = file.createGroup("/training");
        for (const auto& [label, t] : results.training) write_training(training, label, t);
      }
    } catch (const H5::Exception& e) {
      throw Error::at(path, "cannot write the results file (" + e.getFuncName() + ": " + e.getDetailMsg() + ")");
    }
  });
}

ResultsFile read_results(const std::string& path) {
  try {
    H5::H5File file = open_for_reading(path);
    Reader rd{path};
    H5::Group root = file.openGroup("/");
    ResultsFile out;
    const std::string schema = rd.string_attr(root, "schema", "/");
    if (schema != kResultsSchema) throw Error::in_file(path, "attribute schema", kResultsSchema, "'" + schema + "'");
    for (const AttributeSpec& a : root_attribute_specs())
      if (a.presence == Presence::required && a.type == "string") rd.string_attr(root, a.name, "/");
    out.attributes = rd.all_string_attrs(root);
#define DRAFTLAB_READ_ROOT_INT(name, default_value, presence, meaning)                 \
  if (Presence::presence == Presence::required || H5Aexists(root.getId(), #name) > 0) \
    out.name = rd.int_attr(root, #name, "/");
    DRAFTLAB_ROOT_ATTRIBUTES(DRAFTLAB_NO_STRING, DRAFTLAB_READ_ROOT_INT)
#undef DRAFTLAB_READ_ROOT_INT

    H5::Group runs = rd.group(root, "runs", "");
    std::vector<std::string> names;
    for (hsize_t i = 0; i < runs.getNumObjs(); ++i) names.push_back(runs.getObjnameByIdx(i));
    // Numeric order (0000, 0001, ...; wider numbers past 9999).
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] != run_name(i))
        throw Error::in_file(path, "/runs/" + names[i], "runs named " + run_name(0) + ", " + run_name(1) + ", ... in order",
                             "'" + names[i] + "' as run " + std::to_string(i));
      out.runs.push_back(rd.run(runs.openGroup(names[i]), "/runs/" + names[i]));
    }
    if (link_exists(root, "training")) {
      H5::Group training = root.openGroup("training");
      for (hsize_t i = 0; i < training.getNumObjs(); ++i) {
        const std::string label = training.getObjnameByIdx(i);
        out.training[label] = read_training_group(training.openGroup(label), path, "/training/" + label);
      }
    }
    validate_results(out, path);
    return out;
  } catch (const H5::Exception& e) {
    throw Error::at(path, "not a readable draftlab results file (" + e.getFuncName() + ": " + e.getDetailMsg() + ")");
  }
}

ResultsFile merge_results(const std::vector<std::string>& paths) {
  check(!paths.empty(), "merge: expected at least one input file");
  ResultsFile merged = read_results(paths[0]);
  for (size_t i = 1; i < paths.size(); ++i) {
    ResultsFile next = read_results(paths[i]);
    for (const char* key : {"schema", "experiment"}) {
      const std::string a = merged.attributes[key], b = next.attributes[key];
      if (a != b)
        throw Error::in_file(paths[i], std::string("attribute ") + key, "'" + a + "' as in " + paths[0] + " (files of one experiment)",
                             "'" + b + "'");
    }
    for (auto& run : next.runs) merged.runs.push_back(std::move(run));
    for (auto& [label, t] : next.training) merged.training.emplace(label, std::move(t));  // the first copy wins
  }
  merged.attributes["shard"] = "merged:" + std::to_string(paths.size());
  return merged;
}

}  // namespace draftlab
