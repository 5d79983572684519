#include "core/results/hdf5_safe_read.h"

#include "core/base/error.h"

namespace draftlab {

namespace {

// Bytes of values per byte of file a dataset may expand to: above deflate's largest ratio (about 1032:1), so a file
// another writer compressed still reads, while a 20 KB file can no longer ask for more than 40 MB.
constexpr hsize_t kMaxExpansion = 2048;

hsize_t file_size_of(const H5::DataSet& set) {
  const hid_t file = H5Iget_file_id(set.getId());
  hsize_t size = 0;
  if (file >= 0) {
    H5Fget_filesize(file, &size);
    H5Fclose(file);
  }
  return size;
}

}  // namespace

void check_single_value(const H5::Attribute& a, const std::string& source, const std::string& field,
                        const std::string& expected) {
  const hssize_t n = a.getSpace().getSimpleExtentNpoints();
  if (n != 1) throw Error::in_file(source, field, expected, "an attribute of " + std::to_string(n) + " values");
}

void check_values_stored(const H5::DataSet& set, hsize_t count, const std::string& source, const std::string& field) {
  if (count == 0) return;
  const std::string expected = std::to_string(count) + " values stored in the file";
  H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
  if (H5Dget_space_status(set.getId(), &status) < 0 || status != H5D_SPACE_STATUS_ALLOCATED)
    throw Error::in_file(source, field, expected, "a dataset declaring them without their data");
  const hsize_t file_size = file_size_of(set);
  hsize_t bytes = 0, limit = 0;
  if (__builtin_mul_overflow(count, static_cast<hsize_t>(set.getDataType().getSize()), &bytes) ||
      __builtin_mul_overflow(file_size, kMaxExpansion, &limit) || bytes > limit)
    throw Error::in_file(source, field, expected,
                         "more than a file of " + std::to_string(file_size) + " bytes can hold (a corrupt size)");
}

std::string read_string_attribute(const H5::Attribute& a, const std::string& source, const std::string& field) {
  check_single_value(a, source, field, "a string");
  const H5::StrType type = a.getStrType();
  if (!type.isVariableStr()) {
    std::string value;
    a.read(type, value);
    return value.c_str();
  }
  char* value = nullptr;
  try {
    a.read(type, &value);
  } catch (...) {  // a read failing after HDF5 allocated the string (a corrupt heap) still hands it over
    H5free_memory(value);
    throw;
  }
  std::string out = value ? value : "";
  H5free_memory(value);
  return out;
}

}  // namespace draftlab
