// The loop every PackedMatrix kernel shares (private to core/ops): panel groups outer, row chunks inner, tiles of
// MR rows x NP panels, and the software prefetch that streams weights ahead of the tiles. A kernel family supplies
// kMaxRows, panels_for(mr), group_panels(largest chunk) and tile<S, MR, NP>(rows, panels, panel_bytes, k, y, ldy,
// cols, prefetch); `rows` is whatever view of x the family reads (FloatRows, or quantized rows for Int8 kernels)
// with a from(r) that starts at row r.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/ops/packed_matrix.h"

namespace draftlab::panel_loop {

constexpr int64_t P = PackedMatrix::kPanel;
constexpr int64_t kPrefetchBytes = 768;  // how far ahead in each panel's stream (one row chunk)

// Where a tile's software prefetch goes. in_stream: kPrefetchBytes ahead in each of its panels (a call with one
// row chunk: nothing else will read these panels). next != nullptr: `lines` cache lines from `next` (its slice of
// the next panel group), spread evenly over the tile's k input indices, into L2. Neither: no prefetch.
struct Prefetch {
  bool in_stream = false;
  const uint8_t* next = nullptr;
  int64_t lines = 0;
};

// The prefetches input index i of k issues (called once per i inside a tile, before its panel loads): the lines
// from floor(i * lines / k) up to the next index's, so each line of the slice is asked for once.
inline void prefetch_next_line(const Prefetch& pf, int64_t i, int64_t step16) {
#if defined(__x86_64__)
  if (pf.next == nullptr) return;
  for (int64_t l = (i * step16) >> 16, end = ((i + 1) * step16) >> 16; l < end; ++l)
    _mm_prefetch(reinterpret_cast<const char*>(pf.next + l * 64), _MM_HINT_T1);
#else
  (void)pf, (void)i, (void)step16;
#endif
}
// Lines per input index in 16.16 fixed point (so the loop needs no division).
inline int64_t prefetch_step16(const Prefetch& pf, int64_t k) { return pf.next ? (pf.lines << 16) / k : 0; }

// Balanced row chunks: n rows into ceil(n / max_mr) chunks whose sizes differ by at most one.
struct RowChunks {
  int64_t count, base, extra;  // chunk c has base + (c < extra) rows
  RowChunks(int64_t n, int64_t max_mr) : count((n + max_mr - 1) / max_mr), base(n / count), extra(n % count) {}
  int64_t rows(int64_t c) const { return base + (c < extra ? 1 : 0); }
  int64_t largest() const { return base + (extra > 0 ? 1 : 0); }
};

// The tile instantiated for run-time rows mr (1 .. Kernels::kMaxRows) and panels np (1 .. Kernels::panels_for(mr)):
// Kernels::tile<S, MR, NP>(args...). One dispatch for every kernel family, once per tile.
template <class Kernels, WeightStorage S, int MR, int NP = 1, class... Args>
inline void run_tile_np(int np, const Args&... args) {
  if constexpr (NP < Kernels::panels_for(MR))
    if (np > NP) return run_tile_np<Kernels, S, MR, NP + 1>(np, args...);
  Kernels::template tile<S, MR, NP>(args...);
}
template <class Kernels, WeightStorage S, int MR = 1, class... Args>
inline void run_tile(int64_t mr, int np, const Args&... args) {
  if constexpr (MR < Kernels::kMaxRows)
    if (mr > MR) return run_tile<Kernels, S, MR + 1>(mr, np, args...);
  run_tile_np<Kernels, S, MR>(np, args...);
}

// Rows of float32 x: row r at x + r * ldx.
struct FloatRows {
  const float* x;
  int64_t ldx;
  FloatRows from(int64_t r) const { return {x + r * ldx, ldx}; }
};

// The loop every path shares: panel groups outer, row chunks inner, each chunk in tiles of its own width, so a
// group's panels stay in cache while every chunk reads them; with several chunks the tiles of one group prefetch
// the next, a slice each.
template <class Kernels, WeightStorage S, class Rows>
void multiply_with(const uint8_t* data, int64_t panel_bytes, int64_t out, int64_t k, const Rows& x, int64_t n,
                   float* y, int64_t ldy, int64_t p0, int64_t p1) {
  const RowChunks chunks(n, Kernels::kMaxRows);
  const int group = Kernels::group_panels(static_cast<int>(chunks.largest()));
  auto width = [&](int64_t mr) { return std::min(Kernels::panels_for(static_cast<int>(mr)), group); };
  int64_t tiles_per_group = 0;
  for (int64_t c = 0; c < chunks.count; ++c) tiles_per_group += (group + width(chunks.rows(c)) - 1) / width(chunks.rows(c));
  for (int64_t p = p0; p < p1; p += group) {
    const int64_t in_group = std::min<int64_t>(group, p1 - p);
    const int64_t next_lines = std::min<int64_t>(group, p1 - p - in_group) * panel_bytes / 64;
    int64_t r0 = 0, t = 0;
    for (int64_t c = 0; c < chunks.count; ++c) {
      const int64_t mr = chunks.rows(c), np = width(mr);
      for (int64_t q = 0; q < in_group; q += np, ++t) {
        const int nq = static_cast<int>(std::min(np, in_group - q));
        const int64_t cols = std::min(nq * P, out - (p + q) * P);
        Prefetch pf;
        // One chunk: also ahead in the panels' own streams. Always: the next group into L2, a slice per tile. Groups
        // are short on small models (a few KB a panel), and without it each began on cold misses: ts-target's
        // float16 forward of one token took 2.0-2.4 ms with the slices only for several chunks, 1.3-1.4 ms now.
        if (chunks.count == 1) pf.in_stream = true;
        if (next_lines > 0) {
          const int64_t l0 = t * next_lines / tiles_per_group, l1 = (t + 1) * next_lines / tiles_per_group;
          pf.next = data + (p + in_group) * panel_bytes + l0 * 64;
          pf.lines = l1 - l0;
        }
        run_tile<Kernels, S>(mr, nq, x.from(r0), data + (p + q) * panel_bytes, panel_bytes, k,
                                  y + r0 * ldy + (p + q) * P, ldy, cols, pf);
      }
      r0 += mr;
    }
  }
}

}  // namespace draftlab::panel_loop
