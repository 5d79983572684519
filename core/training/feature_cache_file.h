// FeatureCacheFile - the HDF5 side of the feature cache (feature_cache.h describes the layout): the file's root
// attributes, its datasets checked against the shapes a run expects, and rows read into plain buffers, each value
// checked. Torch-free, so that fuzzing (tests/fuzz/feature_cache_fuzz.cpp) reaches everything that reads a cache.
#pragma once

#include <H5Cpp.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace draftlab {

extern const char* const kFeatureCacheFormat;  // the "format" attribute: "draftlab-feature-cache-v1"

// IEEE half precision as an HDF5 type (h5py reads it as numpy float16); written and read with this same type in
// memory, so HDF5 converts nothing.
H5::FloatType feature_cache_float16_type();

// Selects rows [first, first + count) of a cache dataset of rank 1 to 3 (whole rows) in its file space; returns the
// matching memory space.
H5::DataSpace select_cache_rows(H5::DataSpace& file_space, int rank, hsize_t first, hsize_t count);

class FeatureCacheFile {
 public:
  // Opens `path` and reads its root attributes (one string each). Throws Error naming the file.
  explicit FeatureCacheFile(const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& attributes() const { return attributes_; }
  std::string attribute(const std::string& key) const;  // "" when absent

  // Checks the file against a cache of `batch` windows per step, `span` tokens per window and `width` features per
  // token: format; steps an integer >= 1 whose steps * batch * span * width is a size; /windows int [N, span] and
  // /features float32 or IEEE float16 [N, span, width] (as feature_dtype says) present, /loss_mask int [N, span] and
  // /lengths int [N] when present, each with its values stored. Throws Error naming the file, the field, what was
  // expected and what is there.
  void check_layout(int64_t batch, int64_t span, int64_t width);
  // The format attribute alone (check_layout checks it too): Error naming it unless kFeatureCacheFormat.
  void check_format() const;

  int64_t steps() const { return steps_; }
  int64_t windows() const { return windows_; }
  bool has_mask() const { return has_mask_; }
  bool has_lengths() const { return has_lengths_; }
  bool float16_features() const { return float16_; }

  // The listed rows (each in 0..windows()-1), after check_layout: tokens into windows [rows, span], the loss mask
  // into mask and the lengths into lengths when the file has them (else those may be null). A token outside
  // 0..vocab-1, a mask value other than 0/1 or a length outside 0..span throws Error naming the dataset and row.
  void read_rows(const std::vector<int64_t>& rows, int64_t vocab, int64_t* windows, uint8_t* mask,
                 int64_t* lengths) const;
  // The features of rows[first, first + count) into out: count * span * width values, float or (float16_features())
  // IEEE halves.
  void read_features(const std::vector<int64_t>& rows, int64_t first, int64_t count, void* out) const;

 private:
  void check_rows(const std::vector<int64_t>& rows) const;

  std::string path_;
  H5::H5File file_;
  H5::DataSet windows_set_, mask_set_, lengths_set_, features_set_;
  std::map<std::string, std::string> attributes_;
  int64_t steps_ = 0, windows_ = 0, span_ = 0, width_ = 0;
  bool has_mask_ = false, has_lengths_ = false, float16_ = false, checked_ = false;
};

}  // namespace draftlab
