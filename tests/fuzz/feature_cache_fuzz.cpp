// The feature cache reader (core/training/feature_cache_file.h) on well-formed HDF5 files with fuzzed content, as
// results_schema_fuzz.cpp does for the results file: the bytes choose the shape of a cache (batch, span, width,
// vocabulary), then for each root attribute and dataset whether it is written as a cache holds it, left out, given
// another type, rank or shape, declared without its data or made a group, and the values it holds. HDF5's writer
// makes the file, so what is fuzzed is draftlab's checking and reading of it: the layout check, then rows and
// features read back for row lists of the fuzzer's choosing (some outside the cache).
#include <H5Cpp.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/training/feature_cache_file.h"
#include "tests/fuzz/fuzz_input.h"

namespace draftlab::fuzz {
namespace {

enum Kind { kInt64, kUInt8, kFloat32, kFloat16, kFloat64, kString, kKinds };

H5::DataType file_type(Kind kind) {
  switch (kind) {
    case kInt64: return H5::PredType::STD_I64LE;
    case kUInt8: return H5::PredType::STD_U8LE;
    case kFloat32: return H5::PredType::IEEE_F32LE;
    case kFloat16: return feature_cache_float16_type();
    case kFloat64: return H5::PredType::IEEE_F64LE;
    default: return H5::StrType(H5::PredType::C_S1, 4);
  }
}

class CacheMaker {
 public:
  CacheMaker(FuzzedDataProvider& in, H5::H5File& file) : in_(in), file_(file) {}

  void attribute(const std::string& name, const std::string& valid) {
    const uint8_t how = in_.ConsumeIntegral<uint8_t>();
    if (how >= 200 && how < 215) return;  // left out
    H5::Group root = file_.openGroup("/");
    if (how >= 215 && how < 225) {  // an integer where a string belongs
      const int64_t v = in_.ConsumeIntegral<int64_t>();
      root.createAttribute(name, H5::PredType::STD_I64LE, H5::DataSpace(H5S_SCALAR))
          .write(H5::PredType::NATIVE_INT64, &v);
      return;
    }
    const std::string value = how < 200 ? valid : in_.ConsumeRandomLengthString(24);
    H5::StrType type(H5::PredType::C_S1, value.empty() ? 1 : value.size());
    root.createAttribute(name, type, H5::DataSpace(H5S_SCALAR)).write(type, value.empty() ? std::string(1, '\0') : value);
  }

  // Dataset `name` of `kind` and shape `dims`, as the next byte decides, its values drawn from [lo, hi].
  void dataset(const std::string& name, Kind kind, std::vector<hsize_t> dims, int64_t lo, int64_t hi) {
    const uint8_t how = in_.ConsumeIntegral<uint8_t>();
    if (how >= 176 && how < 190) return;                                                 // left out
    if (how >= 190 && how < 200) { file_.createGroup(name); return; }                    // a group
    if (how >= 200 && how < 214) kind = static_cast<Kind>(in_.ConsumeIntegralInRange<int>(0, kKinds - 1));
    if (how >= 214 && how < 228) dims[in_.ConsumeIntegralInRange<size_t>(0, dims.size() - 1)] += in_.ConsumeBool() ? 1 : -1;
    if (how >= 228 && how < 236) dims.push_back(in_.ConsumeIntegralInRange<hsize_t>(1, 2));   // another rank
    if (how >= 236 && how < 240 && dims.size() > 1) dims.pop_back();
    const bool unwritten = how >= 240;
    hsize_t count = 1;
    for (hsize_t& d : dims) count *= (d = std::min<hsize_t>(d, 64));  // a -1 wrapped: keep files small
    H5::DSetCreatPropList props;
    if (unwritten) {
      std::vector<hsize_t> chunk(dims.size(), 1);
      props.setChunk(static_cast<int>(dims.size()), chunk.data());
    }
    H5::DataSpace space(static_cast<int>(dims.size()), dims.data());
    H5::DataSet set = file_.createDataSet(name, file_type(kind), space, props);
    if (unwritten || count == 0) return;
    if (kind == kString) {
      std::vector<char> text(count * 4, 'x');
      set.write(text.data(), file_type(kind));
      return;
    }
    std::vector<double> values(count);
    for (double& v : values) v = static_cast<double>(in_.ConsumeIntegralInRange<int64_t>(lo, hi));
    set.write(values.data(), H5::PredType::NATIVE_DOUBLE);
  }

 private:
  FuzzedDataProvider& in_;
  H5::H5File& file_;
};

}  // namespace
}  // namespace draftlab::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  FuzzedDataProvider in(data, size);
  const int64_t batch = in.ConsumeIntegralInRange<int64_t>(1, 3), span = in.ConsumeIntegralInRange<int64_t>(1, 5),
                width = in.ConsumeIntegralInRange<int64_t>(1, 3), vocab = in.ConsumeIntegralInRange<int64_t>(1, 40),
                steps = in.ConsumeIntegralInRange<int64_t>(1, 3);
  const bool float16 = in.ConsumeBool();
  const hsize_t N = static_cast<hsize_t>(steps * batch), T = static_cast<hsize_t>(span), d = static_cast<hsize_t>(width);
  const std::string path = fuzz::scratch_dir() + "/cache.h5";
  try {
    H5::Exception::dontPrint();
    H5::H5File file(path, H5F_ACC_TRUNC);
    fuzz::CacheMaker make(in, file);
    make.attribute("format", kFeatureCacheFormat);
    make.attribute("steps", std::to_string(steps));
    make.attribute("feature_dtype", float16 ? "float16" : "float32");
    make.dataset("windows", fuzz::kInt64, {N, T}, -2, vocab + 1);
    make.dataset("features", float16 ? fuzz::kFloat16 : fuzz::kFloat32, {N, T, d}, -1000, 1000);
    if (in.ConsumeBool()) make.dataset("loss_mask", fuzz::kUInt8, {N, T}, 0, 2);
    if (in.ConsumeBool()) make.dataset("lengths", fuzz::kInt64, {N}, -1, span + 1);
  } catch (const H5::Exception& e) {
    std::fprintf(stderr, "the harness could not write its file: %s\n", e.getDetailMsg().c_str());
    std::abort();
  }
  return fuzz::expect_clean_failure([&] {
    FeatureCacheFile cache(path);
    cache.check_layout(batch, span, width);
    for (int k = 0, lists = in.ConsumeIntegralInRange<int>(1, 3); k < lists; ++k) {
      std::vector<int64_t> rows(in.ConsumeIntegralInRange<size_t>(1, 4));
      for (int64_t& r : rows) r = in.ConsumeIntegralInRange<int64_t>(-1, cache.windows());
      std::vector<int64_t> windows(rows.size() * span), lengths(rows.size());
      std::vector<uint8_t> mask(rows.size() * span);
      std::vector<float> features(rows.size() * span * width);  // float16 rows take half of it
      cache.read_rows(rows, vocab, windows.data(), mask.data(), lengths.data());
      const int64_t first = in.ConsumeIntegralInRange<int64_t>(0, rows.size()),
                    count = in.ConsumeIntegralInRange<int64_t>(0, rows.size() - first);
      cache.read_features(rows, first, count, features.data());
      for (int64_t t : windows)
        if (t < 0 || t >= vocab) std::abort();  // read_rows accepted a token it promised to refuse
    }
  });
}
