#include "core/model/kv_cache.h"

#include <cstring>
#include <string>

#include "core/base/error.h"

namespace draftlab {

KvCache::KvCache(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim, int64_t capacity,
                 const ComputeOptions& options)
    : capacity_(capacity) {
  check(capacity > 0, [&] { return "KvCache: capacity must be positive, got " + std::to_string(capacity); });
  storage_ = at::zeros({num_layers, 2, num_kv_heads, capacity, head_dim},
                       options.tensor_options().dtype(options.kv_cache_dtype()));
}

void KvCache::check_room(int64_t n) const {
  if (length_ + n > capacity_)
    throw Error("context full: " + std::to_string(length_) + " cached + " + std::to_string(n) +
                " new tokens exceed the KV cache capacity of " + std::to_string(capacity_));
}

void KvCache::write(int64_t layer, int64_t start, const at::Tensor& k, const at::Tensor& v) {
  const int64_t n = k.size(1);
  storage_[layer][0].narrow(1, start, n).copy_(k);
  storage_[layer][1].narrow(1, start, n).copy_(v);
}

void KvCache::advance_to(int64_t new_length) {
  check(new_length >= length_ && new_length <= capacity_, [&] {
    return "KvCache::advance_to: " + std::to_string(new_length) + " outside [" + std::to_string(length_) + ", " +
           std::to_string(capacity_) + "]";
  });
  length_ = new_length;
}

void KvCache::truncate(int64_t new_length) {
  check(new_length >= 0 && new_length <= length_, [&] {
    return "KvCache::truncate: " + std::to_string(new_length) + " outside [0, " + std::to_string(length_) + "]";
  });
  length_ = new_length;
}

void KvCache::keep_rows(int64_t start, const std::vector<int64_t>& rows) {
  check(start >= 0 && start <= length_,
        [&] { return "KvCache::keep_rows: start " + std::to_string(start) + " outside cache"; });
  int64_t prev = start - 1;
  bool identity = true;  // rows == start, start+1, ...: nothing to move
  for (size_t i = 0; i < rows.size(); ++i) {
    check(rows[i] > prev && rows[i] < length_, "KvCache::keep_rows: rows must increase within [start, length)");
    identity = identity && rows[i] == start + static_cast<int64_t>(i);
    prev = rows[i];
  }
  const auto kept = static_cast<int64_t>(rows.size());
  if (!identity && storage_.device().is_cpu()) {
    // Row by row in place: kept row i moves down to start + i <= rows[i], and rows increase, so no row is
    // overwritten before it is read. One memmove per (layer, key/value, head, row): no tensor op.
    const int64_t planes = storage_.size(0) * storage_.size(1) * storage_.size(2), hd = storage_.size(4);
    const auto row_bytes = static_cast<size_t>(hd * storage_.element_size());
    char* base = static_cast<char*>(storage_.data_ptr());
    for (int64_t p = 0; p < planes; ++p) {
      char* plane = base + p * capacity_ * static_cast<int64_t>(row_bytes);
      for (int64_t i = 0; i < kept; ++i)
        if (rows[i] != start + i) std::memmove(plane + (start + i) * row_bytes, plane + rows[i] * row_bytes, row_bytes);
    }
  } else if (!identity) {
    auto index = at::tensor(rows, at::TensorOptions().dtype(at::kLong)).to(storage_.device());
    // index_select makes a copy, so source and destination may overlap safely.
    auto gathered = storage_.index_select(3, index);
    storage_.narrow(3, start, kept).copy_(gathered);
  }
  length_ = start + kept;
}

void check_distinct_caches(const std::vector<const KvCache*>& caches, const std::string& what) {
  for (size_t b = 0; b < caches.size(); ++b) {
    check(caches[b] != nullptr, [&] { return what + ": sequence " + std::to_string(b) + " has no cache"; });
    for (size_t a = 0; a < b; ++a)
      check(caches[a] != caches[b], [&] {
        return what + ": sequences " + std::to_string(a) + " and " + std::to_string(b) + " share a cache";
      });
  }
}

}  // namespace draftlab
