#include "core/results/training_curves.h"

#include <H5Cpp.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/results/hdf5_safe_read.h"

namespace draftlab {

const std::vector<TrainingMetric>& training_metrics() {
#define DRAFTLAB_TRAINING_METRIC_ENTRY(name, single_value, meaning) TrainingMetric{#name, single_value, meaning},
  static const std::vector<TrainingMetric> table{DRAFTLAB_TRAINING_METRICS(DRAFTLAB_TRAINING_METRIC_ENTRY)};
#undef DRAFTLAB_TRAINING_METRIC_ENTRY
  return table;
}

const TrainingMetric& find_training_metric(const std::string& name) {
  std::string names;
  for (const TrainingMetric& m : training_metrics()) {
    if (name == m.name) return m;
    names += (names.empty() ? "" : ", ") + std::string(m.name);
  }
  throw Error("unknown training metric '" + name + "' (declared: " + names + ")");
}

const std::vector<std::vector<double>>* TrainingCurves::metric(const std::string& name) const {
  auto it = eval_metrics.find(name);
  return it == eval_metrics.end() ? nullptr : &it->second;
}

void TrainingCurves::add_metric(const std::string& name, std::vector<double> values) {
  find_training_metric(name);
  eval_metrics[name].push_back(std::move(values));
}

void TrainingCurves::validate(const std::string& source, const std::string& where) const {
  auto length = [&](const std::string& column, size_t got, size_t want, const std::string& like) {
    if (got != want)
      throw Error::in_file(source, where + column, std::to_string(want) + " rows (like " + where + like + ")",
                           std::to_string(got) + " rows");
  };
  length("train/loss", train_loss.size(), train_step.size(), "train/step");
  length("train/learning_rate", learning_rate.size(), train_step.size(), "train/step");
  length("eval/loss", eval_loss.size(), eval_step.size(), "eval/step");
  for (const auto& [name, rows] : eval_metrics) {
    const TrainingMetric* m = nullptr;
    for (const TrainingMetric& d : training_metrics())
      if (name == d.name) m = &d;
    if (m == nullptr) throw Error::in_file(source, where + "eval/" + name, "a declared training metric", "an unknown one");
    length("eval/" + name, rows.size(), eval_step.size(), "eval/step");
    for (const auto& row : rows) {
      if (row.size() != rows.front().size() || row.empty())
        throw Error::in_file(source, where + "eval/" + name, "rows of one width", "rows of different widths");
      if (m->single_value && row.size() != 1)
        throw Error::in_file(source, where + "eval/" + name, "one value per pass", std::to_string(row.size()) + " values");
    }
  }
}

std::string TrainingCurves::to_json() const {
  nlohmann::json j;
  j["train_step"] = train_step;
  j["train_loss"] = train_loss;
  j["learning_rate"] = learning_rate;
  j["eval_step"] = eval_step;
  j["eval_loss"] = eval_loss;
  j["eval_metrics"] = eval_metrics;
  return j.dump();
}

TrainingCurves TrainingCurves::from_json(const std::string& text, const std::string& source) {
  try {
    const auto j = nlohmann::json::parse(text);
    TrainingCurves c;
    j.at("train_step").get_to(c.train_step);
    j.at("train_loss").get_to(c.train_loss);
    j.at("learning_rate").get_to(c.learning_rate);
    j.at("eval_step").get_to(c.eval_step);
    j.at("eval_loss").get_to(c.eval_loss);
    if (j.contains("eval_metrics")) j.at("eval_metrics").get_to(c.eval_metrics);
    // States written before the metrics were declared in one table.
    if (j.contains("eval_accuracy"))
      for (double a : j.at("eval_accuracy").get<std::vector<double>>()) c.eval_metrics["accuracy"].push_back({a});
    if (j.contains("eval_alpha")) j.at("eval_alpha").get_to(c.eval_metrics["alpha"]);
    if (j.contains("eval_head_accuracy")) j.at("eval_head_accuracy").get_to(c.eval_metrics["head_accuracy"]);
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error::at(source, std::string("curves: malformed JSON (") + e.what() + ")");
  }
}

namespace {

template <typename T>
const H5::PredType& h5_type();
template <>
const H5::PredType& h5_type<int64_t>() { return H5::PredType::NATIVE_INT64; }
template <>
const H5::PredType& h5_type<double>() { return H5::PredType::NATIVE_DOUBLE; }

template <typename T>
void write_vector(H5::Group& group, const std::string& name, const std::vector<T>& values) {
  const hsize_t dims[1] = {values.size()};
  H5::DataSet set = group.createDataSet(name, h5_type<T>(), H5::DataSpace(1, dims));
  if (!values.empty()) set.write(values.data(), h5_type<T>());
}

void write_rows(H5::Group& group, const std::string& name, const std::vector<std::vector<double>>& rows,
                bool single_value) {
  std::vector<double> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  const hsize_t dims[2] = {rows.size(), rows.empty() ? 0 : rows.front().size()};
  H5::DataSet set = group.createDataSet(name, H5::PredType::NATIVE_DOUBLE, H5::DataSpace(single_value ? 1 : 2, dims));
  if (!flat.empty()) set.write(flat.data(), H5::PredType::NATIVE_DOUBLE);
}

bool exists(const H5::Group& g, const std::string& name) { return H5Lexists(g.getId(), name.c_str(), H5P_DEFAULT) > 0; }

H5::DataSet open_set(const H5::Group& g, const std::string& name, const std::string& source, const std::string& where) {
  if (!exists(g, name)) throw Error::in_file(source, where + name, "a dataset", "missing");
  return g.openDataSet(name);
}

template <typename T>
std::vector<T> read_vector(const H5::Group& g, const std::string& name, const std::string& source,
                           const std::string& where) {
  H5::DataSet set = open_set(g, name, source, where);
  if (set.getSpace().getSimpleExtentNdims() != 1)
    throw Error::in_file(source, where + name, "a 1-D dataset", std::to_string(set.getSpace().getSimpleExtentNdims()) + " dimensions");
  hsize_t n = 0;
  set.getSpace().getSimpleExtentDims(&n);
  check_values_stored(set, n, source, where + name);
  std::vector<T> values(n);
  if (n > 0) set.read(values.data(), h5_type<T>());
  return values;
}

std::vector<std::vector<double>> read_rows(const H5::Group& g, const std::string& name, bool single_value,
                                           const std::string& source, const std::string& where) {
  H5::DataSet set = open_set(g, name, source, where);
  const int rank = set.getSpace().getSimpleExtentNdims();
  if (rank != (single_value ? 1 : 2))
    throw Error::in_file(source, where + name, single_value ? "a 1-D [passes] dataset" : "a 2-D [passes, columns] dataset",
                         std::to_string(rank) + " dimensions");
  hsize_t dims[2] = {0, 1};
  set.getSpace().getSimpleExtentDims(dims);
  hsize_t count = 0;
  if (__builtin_mul_overflow(dims[0], dims[1], &count))
    throw Error::in_file(source, where + name, "a [passes, columns] dataset of at most 2^64 values",
                         std::to_string(dims[0]) + " x " + std::to_string(dims[1]));
  check_values_stored(set, count, source, where + name);
  std::vector<double> flat(count);
  if (!flat.empty()) set.read(flat.data(), H5::PredType::NATIVE_DOUBLE);
  std::vector<std::vector<double>> rows;
  for (hsize_t r = 0; r < dims[0]; ++r)
    rows.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(r * dims[1]),
                      flat.begin() + static_cast<std::ptrdiff_t>((r + 1) * dims[1]));
  return rows;
}

}  // namespace

std::vector<double> TrainingCurves::eval_perplexity() const {
  std::vector<double> perplexity;
  for (double l : eval_loss) perplexity.push_back(std::exp(l));
  return perplexity;
}

void write_training_group(H5::Group& g, const TrainingCurves& c) {
  H5::Group train = g.createGroup("train");
  write_vector(train, "step", c.train_step);
  write_vector(train, "loss", c.train_loss);
  write_vector(train, "learning_rate", c.learning_rate);
  H5::Group eval = g.createGroup("eval");
  write_vector(eval, "step", c.eval_step);
  write_vector(eval, "loss", c.eval_loss);
  write_vector(eval, "perplexity", c.eval_perplexity());
  for (const TrainingMetric& m : training_metrics())
    if (const auto* rows = c.metric(m.name)) write_rows(eval, m.name, *rows, m.single_value);
  for (const auto& [key, value] : c.attributes) {
    H5::StrType type(H5::PredType::C_S1, value.empty() ? 1 : value.size());
    H5::Attribute a = g.createAttribute(key, type, H5::DataSpace(H5S_SCALAR));
    a.write(type, value.empty() ? std::string(1, '\0') : value);
  }
}

TrainingCurves read_training_group(const H5::Group& g, const std::string& source, const std::string& where) {
  const std::string at = where.empty() ? "" : where + "/";
  TrainingCurves c;
  if (!exists(g, "train") || !exists(g, "eval"))
    throw Error::in_file(source, at + "train, " + at + "eval", "the groups of a training log", "missing");
  const H5::Group train = g.openGroup("train"), eval = g.openGroup("eval");
  c.train_step = read_vector<int64_t>(train, "step", source, at + "train/");
  c.train_loss = read_vector<double>(train, "loss", source, at + "train/");
  c.learning_rate = read_vector<double>(train, "learning_rate", source, at + "train/");
  c.eval_step = read_vector<int64_t>(eval, "step", source, at + "eval/");
  c.eval_loss = read_vector<double>(eval, "loss", source, at + "eval/");
  for (const TrainingMetric& m : training_metrics())
    if (exists(eval, m.name)) c.eval_metrics[m.name] = read_rows(eval, m.name, m.single_value, source, at + "eval/");
  for (int i = 0; i < g.getNumAttrs(); ++i) {
    H5::Attribute a = g.openAttribute(static_cast<unsigned>(i));
    if (a.getTypeClass() != H5T_STRING) continue;
    c.attributes[a.getName()] = read_string_attribute(a, source, at + "attribute " + a.getName());
  }
  c.validate(source, at);
  return c;
}

void write_training_log(const std::string& path, const TrainingCurves& c) {
  c.validate(path, "");  // before any file exists
  write_through_temporary(path, [&](const std::string& tmp) {
    try {
      H5::Exception::dontPrint();  // errors become our Error below, not a stack dump on stderr
      H5::H5File file(tmp, H5F_ACC_TRUNC);
      H5::Group root = file.openGroup("/");
      write_training_group(root, c);
    } catch (const H5::Exception& e) {
      throw Error::at(path, "cannot write the HDF5 training log (" + e.getDetailMsg() + ")");
    }
  });
}

TrainingCurves read_training_log(const std::string& path) {
  H5::Exception::dontPrint();
  if (access(path.c_str(), R_OK) != 0) throw Error::at(path, "cannot open (no such file or not readable)");
  if (H5Fis_hdf5(path.c_str()) <= 0) throw Error::at(path, "not an HDF5 file (expected a draftlab training log)");
  try {
    H5::H5File file(path, H5F_ACC_RDONLY);
    return read_training_group(file.openGroup("/"), path, "");
  } catch (const H5::Exception& e) {
    throw Error::at(path, "not a readable draftlab training log (" + e.getDetailMsg() + ")");
  }
}

}  // namespace draftlab
