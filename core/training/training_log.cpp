#include "core/training/training_log.h"

#include <H5Cpp.h>

#include <cmath>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "core/base/error.h"

namespace draftlab {

std::string TrainingCurves::to_json() const {
  nlohmann::json j;
  j["train_step"] = train_step;
  j["train_loss"] = train_loss;
  j["learning_rate"] = learning_rate;
  j["eval_step"] = eval_step;
  j["eval_loss"] = eval_loss;
  if (!eval_accuracy.empty()) j["eval_accuracy"] = eval_accuracy;
  if (!eval_alpha.empty()) j["eval_alpha"] = eval_alpha;
  if (!eval_head_accuracy.empty()) j["eval_head_accuracy"] = eval_head_accuracy;
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
    if (j.contains("eval_accuracy")) j.at("eval_accuracy").get_to(c.eval_accuracy);
    if (j.contains("eval_alpha")) j.at("eval_alpha").get_to(c.eval_alpha);
    if (j.contains("eval_head_accuracy")) j.at("eval_head_accuracy").get_to(c.eval_head_accuracy);
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error::at(source, std::string("curves: malformed JSON (") + e.what() + ")");
  }
}

namespace {

template <typename T>
void write_vector(H5::Group& group, const std::string& name, const std::vector<T>& values,
                  const H5::PredType& type) {
  const hsize_t dims[1] = {values.size()};
  H5::DataSpace space(1, dims);
  H5::DataSet set = group.createDataSet(name, type, space);
  if (!values.empty()) set.write(values.data(), type);
}

template <typename T>
std::vector<T> read_vector(const H5::H5File& file, const std::string& name, const H5::PredType& type) {
  H5::DataSet set = file.openDataSet(name);
  hsize_t n = 0;
  set.getSpace().getSimpleExtentDims(&n);
  std::vector<T> values(n);
  if (n > 0) set.read(values.data(), type);
  return values;
}

// A 2-D [rows, width] float64 dataset as its rows.
std::vector<std::vector<double>> read_rows(const H5::H5File& file, const std::string& name, const std::string& path) {
  H5::DataSet set = file.openDataSet(name);
  hsize_t dims[2] = {0, 0};
  if (set.getSpace().getSimpleExtentNdims() != 2) throw Error::at(path, name + ": expected a 2-D dataset");
  set.getSpace().getSimpleExtentDims(dims);
  std::vector<double> flat(dims[0] * dims[1]);
  if (!flat.empty()) set.read(flat.data(), H5::PredType::NATIVE_DOUBLE);
  std::vector<std::vector<double>> rows;
  for (hsize_t r = 0; r < dims[0]; ++r)
    rows.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(r * dims[1]),
                      flat.begin() + static_cast<std::ptrdiff_t>((r + 1) * dims[1]));
  return rows;
}

// Rows of one width, flattened; throws Error naming `what` when they differ.
std::vector<double> flatten_rows(const std::vector<std::vector<double>>& rows, const std::string& path,
                                 const std::string& what) {
  std::vector<double> flat;
  for (const auto& row : rows) {
    if (row.size() != rows.front().size()) throw Error::at(path, what + ": rows of different lengths");
    flat.insert(flat.end(), row.begin(), row.end());
  }
  return flat;
}

void write_rows(H5::Group& group, const std::string& name, const std::vector<std::vector<double>>& rows,
                const std::vector<double>& flat) {
  const hsize_t dims[2] = {rows.size(), rows.front().size()};
  H5::DataSet set = group.createDataSet(name, H5::PredType::NATIVE_DOUBLE, H5::DataSpace(2, dims));
  if (!flat.empty()) set.write(flat.data(), H5::PredType::NATIVE_DOUBLE);
}

}  // namespace

TrainingCurves read_training_log(const std::string& path, std::map<std::string, std::string>* attributes) {
  try {
    H5::Exception::dontPrint();
    H5::H5File file(path, H5F_ACC_RDONLY);
    TrainingCurves c;
    c.train_step = read_vector<int64_t>(file, "/train/step", H5::PredType::NATIVE_INT64);
    c.train_loss = read_vector<double>(file, "/train/loss", H5::PredType::NATIVE_DOUBLE);
    c.learning_rate = read_vector<double>(file, "/train/learning_rate", H5::PredType::NATIVE_DOUBLE);
    c.eval_step = read_vector<int64_t>(file, "/eval/step", H5::PredType::NATIVE_INT64);
    c.eval_loss = read_vector<double>(file, "/eval/loss", H5::PredType::NATIVE_DOUBLE);
    if (file.nameExists("/eval/accuracy"))
      c.eval_accuracy = read_vector<double>(file, "/eval/accuracy", H5::PredType::NATIVE_DOUBLE);
    if (file.nameExists("/eval/alpha")) c.eval_alpha = read_rows(file, "/eval/alpha", path);
    if (file.nameExists("/eval/head_accuracy")) c.eval_head_accuracy = read_rows(file, "/eval/head_accuracy", path);
    if (attributes) {
      H5::Group root = file.openGroup("/");
      for (int i = 0; i < root.getNumAttrs(); ++i) {
        H5::Attribute a = root.openAttribute(static_cast<unsigned>(i));
        std::string value;
        a.read(a.getStrType(), value);
        (*attributes)[a.getName()] = value;
      }
    }
    return c;
  } catch (const H5::Exception& e) {
    throw Error::at(path, "not a readable draftlab training log (" + e.getDetailMsg() + ")");
  }
}

void write_training_log(const std::string& path, const TrainingCurves& c,
                        const std::map<std::string, std::string>& attributes) {
  const std::string tmp = path + ".tmp";
  // /eval/alpha and /eval/head_accuracy are [passes, width] datasets: checked before any file exists.
  const std::vector<double> alpha = flatten_rows(c.eval_alpha, path, "eval_alpha");
  const std::vector<double> head_accuracy = flatten_rows(c.eval_head_accuracy, path, "eval_head_accuracy");
  try {
    H5::Exception::dontPrint();  // errors become our Error below, not a stack dump on stderr
    {
      H5::H5File file(tmp, H5F_ACC_TRUNC);
      H5::Group train = file.createGroup("/train");
      write_vector(train, "step", c.train_step, H5::PredType::NATIVE_INT64);
      write_vector(train, "loss", c.train_loss, H5::PredType::NATIVE_DOUBLE);
      write_vector(train, "learning_rate", c.learning_rate, H5::PredType::NATIVE_DOUBLE);
      H5::Group eval = file.createGroup("/eval");
      std::vector<double> perplexity;
      for (double l : c.eval_loss) perplexity.push_back(std::exp(l));
      write_vector(eval, "step", c.eval_step, H5::PredType::NATIVE_INT64);
      write_vector(eval, "loss", c.eval_loss, H5::PredType::NATIVE_DOUBLE);
      write_vector(eval, "perplexity", perplexity, H5::PredType::NATIVE_DOUBLE);
      if (!c.eval_accuracy.empty()) write_vector(eval, "accuracy", c.eval_accuracy, H5::PredType::NATIVE_DOUBLE);
      if (!c.eval_alpha.empty()) write_rows(eval, "alpha", c.eval_alpha, alpha);
      if (!c.eval_head_accuracy.empty()) write_rows(eval, "head_accuracy", c.eval_head_accuracy, head_accuracy);
      H5::Group root = file.openGroup("/");
      for (const auto& [key, value] : attributes) {
        H5::StrType type(H5::PredType::C_S1, value.empty() ? 1 : value.size());
        H5::Attribute a = root.createAttribute(key, type, H5::DataSpace(H5S_SCALAR));
        a.write(type, value.empty() ? std::string(1, '\0') : value);
      }
    }  // closed (and flushed) before the rename
  } catch (const H5::Exception& e) {
    std::remove(tmp.c_str());
    throw Error::at(path, "cannot write the HDF5 training log (" + e.getDetailMsg() + ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error::at(path, "cannot rename the HDF5 training log into place");
  }
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace draftlab
