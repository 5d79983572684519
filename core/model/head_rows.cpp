#include "core/model/head_rows.h"

#include <cstring>

#include "core/model/host_tensor.h"
#include "core/model/llama_layer.h"

namespace draftlab {

at::Tensor visible_from_ancestors(const KvCache& cache, int64_t n, const at::Tensor& ancestor_mask) {
  if (!ancestor_mask.defined()) return {};
  check_ancestor_mask(ancestor_mask, n);
  auto visible = at::ones({n, cache.length() + n}, at::TensorOptions().dtype(at::kBool));
  visible.narrow(1, cache.length(), n).copy_(ancestor_mask.to(at::kCPU, at::kBool));
  return visible;
}

void append_head_segment(NativeWorkspace& ws, const RotaryEmbedding& rope, KvCache* cache, int64_t row, int64_t rows,
                         const int64_t* positions, const at::Tensor& visible, uint8_t*& visible_at) {
  const int64_t half = rope.cos_table().size(1);
  const float* cos_table = rope.cos_table().data_ptr<float>();
  const float* sin_table = rope.sin_table().data_ptr<float>();
  for (int64_t j = 0; j < rows; ++j) {
    ws.cos[row + j] = cos_table + positions[j] * half;
    ws.sin[row + j] = sin_table + positions[j] * half;
  }
  const int64_t start = cache->length(), T = start + rows;
  RowSegment segment{cache, row, rows, start, nullptr};
  if (visible.defined()) {
    static_assert(sizeof(bool) == 1, "visibility is copied as bytes");
    const auto v = to_host(visible, at::kBool);
    std::memcpy(visible_at, v.data_ptr<bool>(), static_cast<size_t>(rows * T));
    segment.visible = visible_at;
    visible_at += rows * T;
  }
  ws.segments.push_back(segment);
}

}  // namespace draftlab
