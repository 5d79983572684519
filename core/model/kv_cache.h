// KvCache - preallocated keys and values of every layer for one sequence (batch 1).
//
// Storage is one tensor [layers, 2 (k/v), kv_heads, capacity, head_dim], so that accepted-path compaction and
// rollback touch all layers in a single operation. Rows [0, length) are committed context. A forward writes its
// n new rows at [length, length + n) and then advances length; a verifier that scored a draft tree then keeps
// only the accepted rows with keep_rows(), which packs them down in order (parents precede children, so the
// accepted path stays in position order).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/compute_options.h"

namespace draftlab {

class KvCache {
 public:
  KvCache(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim, int64_t capacity,
          const ComputeOptions& options);

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  int64_t num_layers() const { return storage_.size(0); }

  // Views [kv_heads, rows, head_dim] of the first `rows` keys / values of a layer.
  at::Tensor keys(int64_t layer, int64_t rows) const { return storage_[layer][0].narrow(1, 0, rows); }
  at::Tensor values(int64_t layer, int64_t rows) const { return storage_[layer][1].narrow(1, 0, rows); }

  // Writes k, v [kv_heads, n, head_dim] of one layer at rows [start, start + n). Does not move length.
  void write(int64_t layer, int64_t start, const at::Tensor& k, const at::Tensor& v);

  // Sets the committed length after a forward wrote rows [length, new_length). Throws if past capacity.
  void advance_to(int64_t new_length);

  // Rollback: forget everything from new_length on.
  void truncate(int64_t new_length);

  // Compaction: of the rows [start, length), keep `rows` (absolute indices, increasing, each >= start) and pack
  // them to [start, start + rows.size()); length becomes start + rows.size(). One gather for all layers.
  void keep_rows(int64_t start, const std::vector<int64_t>& rows);

  // Throws Error if n more rows do not fit.
  void check_room(int64_t n) const;

  // The element type of keys and values (ComputeOptions::kv_cache_dtype()).
  at::ScalarType dtype() const { return storage_.scalar_type(); }
  bool float16_storage() const { return dtype() == at::kHalf; }

  // Raw storage for the native CPU path (on CPU; float32 elements, or float16 bits as uint16_t when
  // float16_storage()): keys / values of a layer, where kv head g, row t starts at element
  // g * head_stride() + t * head_dim.
  void* key_data(int64_t layer) const { return element(2 * layer * layer_stride()); }
  void* value_data(int64_t layer) const { return element((2 * layer + 1) * layer_stride()); }
  int64_t head_stride() const { return storage_.size(3) * storage_.size(4); }

 private:
  int64_t layer_stride() const { return storage_.size(2) * head_stride(); }
  void* element(int64_t index) const {
    return static_cast<char*>(storage_.data_ptr()) + index * static_cast<int64_t>(storage_.element_size());
  }

  at::Tensor storage_;
  int64_t capacity_ = 0;
  int64_t length_ = 0;
};

// A batched forward's caches must be distinct (each sequence writes its own rows). Throws Error "WHAT: sequences a
// and b share a cache" (or "sequence b has no cache").
void check_distinct_caches(const std::vector<const KvCache*>& caches, const std::string& what);

}  // namespace draftlab
