// The torch.save() file format (pytorch_model.bin, the format published EAGLE heads ship in), read without libtorch:
// core/model/torch_checkpoint.h turns what this returns into tensors. Torch-free, so the parser runs under the
// sanitizers and the fuzzer (tests/fuzz).
//
// A torch.save() file is a zip archive: <name>/data.pkl (a pickle of the state dict, protocol 2, each tensor a
// torch._utils._rebuild_tensor_v2 call over a persistent-id storage), <name>/data/<key> (each storage's raw
// little-endian bytes) and <name>/version. libtorch's unpickler cannot be used: it turns collections.OrderedDict,
// which is what a state_dict() is, into None. So this is a small reader of exactly that subset: stored (not
// deflated) zip entries, zip64 sizes, and the pickle opcodes torch.save emits for a dict of tensors. Anything else
// (code objects, other globals) is refused by name: loading never executes anything.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/base/dtype.h"

namespace draftlab {

// One tensor of the state dict as stored: a strided view of a storage (a flat array of `dtype`). Checked when read:
// sizes and strides non-negative, and every element the view reaches inside the storage.
struct StoredTensor {
  std::string name;
  DType dtype = DType::F32;
  std::shared_ptr<const std::string> storage;  // the storage's bytes; tensors viewing one storage share it
  int64_t storage_offset = 0;                  // in elements
  std::vector<int64_t> sizes, strides;         // in elements
};

// The named tensors of a torch.save()'d state dict (a dict, or an OrderedDict, of str -> tensor), in file order.
// Throws Error naming the file when it is not such an archive or holds anything else.
std::vector<StoredTensor> read_torch_archive(const std::string& path);

}  // namespace draftlab
