#include "core/model/torch_checkpoint.h"

#include <filesystem>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/safetensors.h"
#include "core/io/torch_archive.h"
#include "core/model/checkpoint_tensor.h"

namespace draftlab {

std::vector<std::pair<std::string, at::Tensor>> read_torch_state_dict(const std::string& path) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const StoredTensor& t : read_torch_archive(path)) {  // views checked to lie inside their storages
    const auto dtype = scalar_type_of(t.dtype);
    const int64_t numel = static_cast<int64_t>(t.storage->size() / dtype_size(t.dtype));
    // A view of the archive's bytes, copied out by clone() (contiguous), so nothing refers to them afterwards.
    const auto flat = at::from_blob(const_cast<char*>(t.storage->data()), {numel}, at::TensorOptions().dtype(dtype));
    out.emplace_back(t.name, flat.as_strided(t.sizes, t.strides, t.storage_offset).clone(at::MemoryFormat::Contiguous));
  }
  return out;
}

int64_t convert_torch_checkpoint(const std::string& in_path, const std::string& out_dir) {
  const auto tensors = read_torch_state_dict(in_path);
  std::vector<at::Tensor> kept;  // owners of the bytes written below
  std::vector<TensorToWrite> entries;
  for (const auto& [name, t] : tensors) {
    DType dtype;
    at::Tensor data = t;
    switch (t.scalar_type()) {
      case at::kFloat: dtype = DType::F32; break;
      case at::kHalf: dtype = DType::F16; break;
      case at::kBFloat16: dtype = DType::BF16; break;
      case at::kDouble: dtype = DType::F64; break;
      case at::kLong: case at::kInt: case at::kShort: case at::kByte: case at::kChar:
        data = t.to(at::kLong);
        dtype = DType::I64;
        break;
      case at::kBool: dtype = DType::BOOL; break;  // EAGLE-3's t2d
      default:
        throw Error::at(in_path, "tensor '" + name + "' has dtype " + std::string(c10::toString(t.scalar_type())) +
                                     ", which safetensors heads do not use");
    }
    kept.push_back(data);
    entries.push_back({name, dtype, data.sizes().vec(), data.data_ptr(), static_cast<size_t>(data.nbytes())});
  }
  std::filesystem::create_directories(out_dir);
  write_safetensors(out_dir + "/model.safetensors", entries, {{"format", "pt"}});
  // The published heads keep config.json beside pytorch_model.bin; EagleHead::load needs it beside the weights.
  const std::filesystem::path config = std::filesystem::path(in_path).parent_path() / "config.json";
  if (is_file(config.string()) &&
      std::filesystem::weakly_canonical(config) != std::filesystem::weakly_canonical(out_dir + "/config.json"))
    write_file_atomically(out_dir + "/config.json", read_text_file(config.string()));
  return static_cast<int64_t>(entries.size());
}

}  // namespace draftlab
