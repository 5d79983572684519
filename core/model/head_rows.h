// What the one-layer draft heads (EagleHead, Eagle3Head) share when they lay their rows out: the visibility a
// forward() with an ancestor mask stands for, and one sequence's segment of the native workspace.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "core/model/kv_cache.h"
#include "core/model/native_decoder.h"
#include "core/model/rope.h"

namespace draftlab {

// forward()'s visibility [n, cache.length() + n]: the cached prefix always, then the ancestor mask [n, n] among
// the new rows (checked); undefined when the mask is (causal).
at::Tensor visible_from_ancestors(const KvCache& cache, int64_t n, const at::Tensor& ancestor_mask);

// Appends a sequence of `rows` rows at workspace row `row` to ws.segments: its RoPE rows (positions [rows], host
// int64) and, when `visible` [rows, cache rows + rows] is defined, its visibility copied to *visible_at (advanced).
void append_head_segment(NativeWorkspace& ws, const RotaryEmbedding& rope, KvCache* cache, int64_t row, int64_t rows,
                         const int64_t* positions, const at::Tensor& visible, uint8_t*& visible_at);

}  // namespace draftlab
