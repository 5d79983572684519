// Reading torch.save() checkpoints (pytorch_model.bin), the format published EAGLE heads ship in, so that
// `draftlab convert-head` can turn them into the safetensors folder EagleHead::load reads (keys unchanged).
// The archive and its pickle are parsed without libtorch (core/io/torch_archive.h); this makes the tensors.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

namespace draftlab {

// The named tensors of a torch.save()'d state dict (a dict, or an OrderedDict, of str -> tensor), in file order,
// contiguous on the CPU. Throws Error naming the file when it is not such an archive or holds anything else.
std::vector<std::pair<std::string, at::Tensor>> read_torch_state_dict(const std::string& path);

// pytorch_model.bin -> out_dir/model.safetensors (the same keys, float tensors in their stored dtype, integer ones
// as int64, boolean ones as BOOL), plus config.json copied from beside the input when there is one. Written atomically; out_dir is
// created. Returns the number of tensors written. Throws Error naming the file.
int64_t convert_torch_checkpoint(const std::string& in_path, const std::string& out_dir);

}  // namespace draftlab
