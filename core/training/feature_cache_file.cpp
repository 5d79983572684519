#include "core/training/feature_cache_file.h"

#include <charconv>

#include "core/base/error.h"
#include "core/results/hdf5_safe_read.h"

namespace draftlab {

const char* const kFeatureCacheFormat = "draftlab-feature-cache-v1";

H5::FloatType feature_cache_float16_type() {
  H5::FloatType t(H5::PredType::IEEE_F32LE);
  t.setFields(15, 10, 5, 0, 10);
  t.setSize(2);
  t.setEbias(15);
  return t;
}

H5::DataSpace select_cache_rows(H5::DataSpace& file_space, int rank, hsize_t first, hsize_t count) {
  hsize_t dims[3] = {0, 0, 0};
  file_space.getSimpleExtentDims(dims);  // the rank was checked (check_layout, or the writer's own datasets)
  hsize_t start[3] = {first, 0, 0}, size[3] = {count, dims[1], dims[2]};
  file_space.selectHyperslab(H5S_SELECT_SET, size, start);
  return H5::DataSpace(rank, size);
}

namespace {

std::string shape_string(const std::vector<hsize_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Opens dataset `name`, which must have type class `cls` (of `size` bytes, when size > 0), exactly the shape `dims`,
// and its values stored in the file (hdf5_safe_read.h: a dataset may declare rows it does not hold).
H5::DataSet open_checked(const H5::H5File& file, const std::string& path, const std::string& name, H5T_class_t cls,
                         size_t size, const std::string& type_name, const std::vector<hsize_t>& dims) {
  const std::string what = type_name + " " + shape_string(dims);
  if (!file.nameExists(name)) throw Error::in_file(path, name, "a dataset of " + what, "none");
  if (file.childObjType(name) != H5O_TYPE_DATASET) throw Error::in_file(path, name, "a dataset of " + what, "a group");
  H5::DataSet set = file.openDataSet(name);
  const H5::DataType type = set.getDataType();
  if (type.getClass() != cls || (size > 0 && type.getSize() != size))
    throw Error::in_file(path, name, what, "a dataset of another type (" + std::to_string(type.getSize()) + "-byte)");
  const H5::DataSpace space = set.getSpace();
  const int rank = space.getSimpleExtentNdims();
  std::vector<hsize_t> got(static_cast<size_t>(rank > 0 ? rank : 0));
  if (rank > 0) space.getSimpleExtentDims(got.data());
  if (got != dims) throw Error::in_file(path, name, what, "shape " + shape_string(got));
  hsize_t count = 1;
  for (hsize_t d : dims) count *= d;  // fits: check_layout bounded N * span * width
  check_values_stored(set, count, path, name);
  return set;
}

}  // namespace

FeatureCacheFile::FeatureCacheFile(const std::string& path) : path_(path) {
  try {
    H5::Exception::dontPrint();
    file_ = H5::H5File(path, H5F_ACC_RDONLY);
    H5::Group root = file_.openGroup("/");
    for (int i = 0; i < root.getNumAttrs(); ++i) {
      H5::Attribute a = root.openAttribute(static_cast<unsigned>(i));
      attributes_[a.getName()] = read_string_attribute(a, path, "attribute " + a.getName());
    }
  } catch (const H5::Exception& e) {
    throw Error::at(path, "not a readable HDF5 feature cache (" + e.getDetailMsg() + ")");
  }
}

std::string FeatureCacheFile::attribute(const std::string& key) const {
  const auto it = attributes_.find(key);
  return it == attributes_.end() ? std::string() : it->second;
}

void FeatureCacheFile::check_format() const {
  if (attribute("format") != kFeatureCacheFormat)
    throw Error::in_file(path_, "format", std::string("'") + kFeatureCacheFormat + "'", "'" + attribute("format") + "'");
}

void FeatureCacheFile::check_layout(int64_t batch, int64_t span, int64_t width) {
  check_format();
  check(batch > 0 && span > 0 && width > 0, "FeatureCacheFile::check_layout: batch, span and width must be positive");
  const std::string steps = attribute("steps");
  int64_t n = 0, values = 0;
  const auto parsed = std::from_chars(steps.data(), steps.data() + steps.size(), steps_);
  if (parsed.ec != std::errc() || parsed.ptr != steps.data() + steps.size() || steps_ < 1 ||
      __builtin_mul_overflow(steps_, batch, &n) || __builtin_mul_overflow(n, span, &values) ||
      __builtin_mul_overflow(values, width, &values))
    throw Error::in_file(path_, "steps", "an integer >= 1 (the cache holds steps x " + std::to_string(batch) +
                                             " windows)", "'" + steps + "'");
  windows_ = n;
  span_ = span;
  width_ = width;
  const std::string dtype = attribute("feature_dtype");
  if (!dtype.empty() && dtype != "float32" && dtype != "float16")
    throw Error::in_file(path_, "feature_dtype", "float32 or float16", "'" + dtype + "'");
  float16_ = dtype == "float16";
  const hsize_t N = static_cast<hsize_t>(windows_), T = static_cast<hsize_t>(span), d = static_cast<hsize_t>(width);
  try {
    windows_set_ = open_checked(file_, path_, "windows", H5T_INTEGER, 0, "integers", {N, T});
    features_set_ = open_checked(file_, path_, "features", H5T_FLOAT, float16_ ? 2 : 4,
                                 float16_ ? "IEEE float16 (feature_dtype float16)" : "float32", {N, T, d});
    has_mask_ = file_.nameExists("loss_mask");
    if (has_mask_) mask_set_ = open_checked(file_, path_, "loss_mask", H5T_INTEGER, 0, "integers", {N, T});
    has_lengths_ = file_.nameExists("lengths");
    if (has_lengths_) lengths_set_ = open_checked(file_, path_, "lengths", H5T_INTEGER, 0, "integers", {N});
  } catch (const H5::Exception& e) {
    throw Error::at(path_, "malformed feature cache (" + e.getDetailMsg() + ")");
  }
  checked_ = true;
}

void FeatureCacheFile::check_rows(const std::vector<int64_t>& rows) const {
  check(checked_, path_ + ": FeatureCacheFile read before check_layout");
  for (int64_t r : rows)
    check(r >= 0 && r < windows_, path_ + ": row " + std::to_string(r) + ": expected 0.." + std::to_string(windows_ - 1));
}

void FeatureCacheFile::read_rows(const std::vector<int64_t>& rows, int64_t vocab, int64_t* windows, uint8_t* mask,
                                 int64_t* lengths) const {
  check_rows(rows);
  const int64_t B = static_cast<int64_t>(rows.size());
  try {
    // Runs of consecutive rows are read with one call each.
    for (int64_t i = 0; i < B;) {
      int64_t n = 1;
      while (i + n < B && rows[i + n] == rows[i] + n) ++n;
      const hsize_t first = static_cast<hsize_t>(rows[i]), count = static_cast<hsize_t>(n);
      H5::DataSpace ws = windows_set_.getSpace();
      windows_set_.read(windows + i * span_, H5::PredType::NATIVE_INT64, select_cache_rows(ws, 2, first, count), ws);
      if (has_mask_ && mask) {
        H5::DataSpace ms = mask_set_.getSpace();
        mask_set_.read(mask + i * span_, H5::PredType::NATIVE_UINT8, select_cache_rows(ms, 2, first, count), ms);
      }
      if (has_lengths_ && lengths) {
        H5::DataSpace ls = lengths_set_.getSpace();
        lengths_set_.read(lengths + i, H5::PredType::NATIVE_INT64, select_cache_rows(ls, 1, first, count), ls);
      }
      i += n;
    }
  } catch (const H5::Exception& e) {
    throw Error::at(path_, "cannot read the feature cache (" + e.getDetailMsg() + ")");
  }
  // Values a writer of ours cannot have made: a corrupt or foreign file, refused before training indexes with them.
  for (int64_t i = 0; i < B; ++i) {
    const std::string row = "row " + std::to_string(rows[i]);
    for (int64_t t = 0; t < span_; ++t) {
      const int64_t token = windows[i * span_ + t];
      if (token < 0 || token >= vocab)
        throw Error::in_file(path_, "windows " + row, "token ids 0.." + std::to_string(vocab - 1),
                             std::to_string(token));
      if (has_mask_ && mask && mask[i * span_ + t] > 1)
        throw Error::in_file(path_, "loss_mask " + row, "0 or 1", std::to_string(mask[i * span_ + t]));
    }
    if (has_lengths_ && lengths && (lengths[i] < 0 || lengths[i] > span_))
      throw Error::in_file(path_, "lengths " + row, "0.." + std::to_string(span_), std::to_string(lengths[i]));
  }
}

void FeatureCacheFile::read_features(const std::vector<int64_t>& rows, int64_t first, int64_t count, void* out) const {
  check_rows(rows);
  check(first >= 0 && count >= 0 && first + count <= static_cast<int64_t>(rows.size()),
        path_ + ": FeatureCacheFile::read_features: rows [" + std::to_string(first) + ", +" + std::to_string(count) +
            ") of " + std::to_string(rows.size()));
  const size_t value_bytes = float16_ ? 2 : 4, row_bytes = value_bytes * static_cast<size_t>(span_ * width_);
  const H5::FloatType f16 = feature_cache_float16_type();
  const H5::DataType& memory = float16_ ? static_cast<const H5::DataType&>(f16) : H5::PredType::NATIVE_FLOAT;
  try {
    for (int64_t i = first, end = first + count; i < end;) {
      int64_t n = 1;
      while (i + n < end && rows[i + n] == rows[i] + n) ++n;
      H5::DataSpace fs = features_set_.getSpace();
      features_set_.read(static_cast<char*>(out) + static_cast<size_t>(i - first) * row_bytes, memory,
                         select_cache_rows(fs, 3, static_cast<hsize_t>(rows[i]), static_cast<hsize_t>(n)), fs);
      i += n;
    }
  } catch (const H5::Exception& e) {
    throw Error::at(path_, "cannot read the feature cache (" + e.getDetailMsg() + ")");
  }
}

}  // namespace draftlab
