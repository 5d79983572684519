// The results file and training log readers (core/results) on well-formed HDF5 files with fuzzed content. The bytes
// do not become the file (results_file_fuzz.cpp does that, and mostly finds HDF5's own bugs): they choose, for
// every attribute, table column and training curve the schema declares, whether it is written as the schema says,
// left out, written with another type, length, rank or number of values, or declared without data, and its values.
// HDF5's writer makes the file, so what is fuzzed is draftlab's reading and validation of it.
#include <H5Cpp.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <type_traits>

#include "core/results/results_file.h"
#include "core/results/training_curves.h"
#include "tests/fuzz/fuzz_input.h"

namespace draftlab::fuzz {
namespace {

// Column and attribute types of the schema (and fixed-length strings, which it does not use), in a fixed order: a
// "wrong type" is another one.
enum Kind { kInt8, kInt32, kInt64, kFloat, kDouble, kString, kFixedString, kKinds };
constexpr size_t kFixedLength = 8;
template <typename T>
constexpr Kind kind_of() {
  if constexpr (std::is_same_v<T, std::string>) return kString;
  else if constexpr (std::is_same_v<T, int8_t>) return kInt8;
  else if constexpr (std::is_same_v<T, int32_t>) return kInt32;
  else if constexpr (std::is_same_v<T, float>) return kFloat;
  else if constexpr (std::is_same_v<T, double>) return kDouble;
  else return kInt64;
}

class FileMaker {
 public:
  explicit FileMaker(FuzzedDataProvider& in) : in_(in) {}

  // One attribute or dataset of `kind` with `rows` values (scalar when rows < 0), as the next byte decides. `valid`:
  // the one string value the reader accepts, written when the byte says "as the schema says".
  void write(H5::H5Object& at, bool dataset, const std::string& name, Kind kind, hssize_t rows,
             const char* valid = nullptr) {
    const uint8_t how = in_.ConsumeIntegral<uint8_t>();
    if (how >= 160 && how < 176) return;                                // left out
    if (how >= 176 && how < 192) kind = static_cast<Kind>((kind + 1 + how % (kKinds - 1)) % kKinds);  // another type
    if (how >= 192 && how < 208) rows = in_.ConsumeIntegralInRange<hssize_t>(-1, 9);  // another length / count
    const bool rank2 = how >= 208 && how < 216, unwritten = how >= 216 && how < 224;
    const hsize_t n = rows < 0 ? 1 : static_cast<hsize_t>(rows);
    const hsize_t dims[2] = {unwritten ? hsize_t{1} << 40 : n, 2};
    H5::DataSpace space = rows < 0 && !unwritten ? H5::DataSpace(H5S_SCALAR) : H5::DataSpace(rank2 ? 2 : 1, dims);
    const H5::DataType type = file_type(kind);
    if (!dataset) {
      if (unwritten) return;  // attributes have no unwritten form
      H5::Attribute a = at.createAttribute(name, type, space);
      if (valid && how < 160) put(a, &valid, type);
      else write_values(a, kind, n * (rank2 ? 2 : 1));
      return;
    }
    H5::DSetCreatPropList props;
    const hsize_t chunk[2] = {64, 2};
    if (unwritten) props.setChunk(rank2 ? 2 : 1, chunk);
    H5::DataSet set = static_cast<H5::Group&>(at).createDataSet(name, type, space, props);
    if (!unwritten) write_values(set, kind, n * (rank2 ? 2 : 1));
  }

  // Small numbers, so that offsets and back-references sometimes agree and the validator goes deeper.
  int64_t number() { return in_.ConsumeIntegralInRange<int64_t>(-1, 8); }
  std::string text() {
    static const char* const kWords[] = {"", "none", "chain", "static_tree", "dynamic_tree", kResultsSchema, "0/1",
                                         "{}", "mt_bench", "eagle2"};
    const uint8_t pick = in_.ConsumeIntegral<uint8_t>();
    return pick < 200 ? kWords[pick % 10] : in_.ConsumeRandomLengthString(32);
  }

 private:
  static H5::DataType file_type(Kind kind) {
    switch (kind) {
      case kInt8: return H5::PredType::STD_I8LE;
      case kInt32: return H5::PredType::STD_I32LE;
      case kInt64: return H5::PredType::STD_I64LE;
      case kFloat: return H5::PredType::IEEE_F32LE;
      case kDouble: return H5::PredType::IEEE_F64LE;
      default: {
        H5::StrType t(H5::PredType::C_S1, kind == kString ? H5T_VARIABLE : kFixedLength);
        t.setCset(H5T_CSET_UTF8);
        return t;
      }
    }
  }
  // The two write() of the HDF5 C++ API take their arguments in opposite orders.
  static void put(H5::Attribute& a, const void* values, const H5::DataType& type) { a.write(type, values); }
  static void put(H5::DataSet& d, const void* values, const H5::DataType& type) { d.write(values, type); }

  template <class Target>
  void write_values(Target& target, Kind kind, hsize_t count) {
    if (count == 0) return;
    if (kind == kString || kind == kFixedString) {
      std::vector<std::string> values(count);
      std::vector<const char*> ptrs;
      std::string fixed;
      for (auto& v : values) v = text();
      for (auto& v : values) ptrs.push_back(v.c_str());
      for (auto& v : values) fixed += (v + std::string(kFixedLength, '\0')).substr(0, kFixedLength);
      if (kind == kString) put(target, ptrs.data(), file_type(kind));
      else put(target, fixed.data(), file_type(kind));
      return;
    }
    std::vector<double> values(count);  // converted by HDF5 to the file's type
    for (double& v : values) v = static_cast<double>(number()) + (in_.ConsumeBool() ? 0.5 : 0.0);
    put(target, values.data(), H5::PredType::NATIVE_DOUBLE);
  }

  FuzzedDataProvider& in_;
};

void make_file(const std::string& path, FuzzedDataProvider& in) {
  FileMaker make(in);
  H5::H5File file(path, H5F_ACC_TRUNC);
  H5::Group root = file.openGroup("/");
  for (const AttributeSpec& a : root_attribute_specs())
    make.write(root, false, a.name, a.type == "string" ? kString : kInt64, -1, a.name == "schema" ? kResultsSchema : nullptr);
  H5::Group runs = file.createGroup("runs");
  const int n_runs = in.ConsumeIntegralInRange(0, 3);
  for (int i = 0; i < n_runs; ++i) {
    H5::Group run = runs.createGroup(in.ConsumeIntegral<uint8_t>() < 240 ? "000" + std::to_string(i) : "x");
    RunRecord r;
    r.for_each_attribute([&](const char* name, Presence, const auto& value) {
      make.write(run, false, name, kind_of<std::decay_t<decltype(value)>>(), -1);
    });
    r.for_each_table([&](const char* table, const auto& rows) {
      H5::Group t = run.createGroup(table);
      const hssize_t n = in.ConsumeIntegralInRange(0, 6);
      rows.for_each_column([&](const char* name, const auto& column) {
        make.write(t, true, name, kind_of<typename std::decay_t<decltype(column)>::value_type>(), n);
      });
    });
  }
  // Training curves: in a results file's /training/LABEL, and at the root, as a training log has them.
  auto curves = [&](H5::Group& g) {
    H5::Group train = g.createGroup("train"), eval = g.createGroup("eval");
    const hssize_t steps = in.ConsumeIntegralInRange(0, 4), passes = in.ConsumeIntegralInRange(0, 3);
    for (const char* name : {"step", "loss", "learning_rate"}) make.write(train, true, name, name[0] == 's' ? kInt64 : kDouble, steps);
    for (const char* name : {"step", "loss", "perplexity"}) make.write(eval, true, name, name[0] == 's' ? kInt64 : kDouble, passes);
    for (const TrainingMetric& m : training_metrics()) make.write(eval, true, m.name, kDouble, passes);
    make.write(g, false, "command_line", kString, -1);
  };
  if (in.ConsumeBool()) {
    H5::Group training = file.createGroup("training");
    for (int i = in.ConsumeIntegralInRange(0, 2); i > 0; --i) {
      H5::Group label = training.createGroup("head" + std::to_string(i));
      curves(label);
    }
  }
  if (in.ConsumeBool()) curves(root);
}

}  // namespace
}  // namespace draftlab::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  H5::Exception::dontPrint();
  const std::string path = fuzz::scratch_dir() + "/results.h5";
  FuzzedDataProvider in(data, size);
  try {
    fuzz::make_file(path, in);
  } catch (const H5::Exception&) {
    return 0;  // a combination HDF5's writer refuses (an invalid name, ...): nothing to read
  }
  fuzz::expect_clean_failure([&] { read_results(path); });
  return fuzz::expect_clean_failure([&] { read_training_log(path); });
}
