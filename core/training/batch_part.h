// BatchPart - which rows of a training step's batch one forward and backward pass computes.
//
// A step's batch of B rows is cut into `count` contiguous parts, in order, sizes differing by at most one. Data
// parallel gives each rank one part; gradient accumulation (TrainerOptions::accumulate = A) cuts each rank's share
// again: with W ranks, rank r computes parts r*A .. r*A + A - 1 of W*A, one after another, and those parts together
// are exactly its rows of the W-part cut (B*r*A / (W*A) = B*r / W). A part's loss is its share of the step's loss
// (the family divides by the whole step's count), so the parts' gradients add up to the step's gradient: any W and A
// train the same model as one pass over the whole batch, up to the order of floating-point additions.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/error.h"

namespace draftlab {

// Rows [first, first + count) of a batch.
struct BatchRows {
  int64_t first = 0, count = 0;
};

struct BatchPart {
  int64_t index = 0, count = 1;  // part `index` of `count`

  bool whole() const { return count == 1; }
  BatchRows rows(int64_t batch) const {
    const int64_t first = batch * index / count;
    return {first, batch * (index + 1) / count - first};
  }
};

// Every part needs a row: throws Error naming --batch unless batch >= ranks * accumulate (accumulate >= 1 is the
// Trainer's own check).
inline void check_batch_parts(int64_t batch, int64_t ranks, int64_t accumulate) {
  auto count = [](int64_t n, const char* one, const char* many) { return std::to_string(n) + (n == 1 ? one : many); };
  check(batch >= ranks * accumulate,
        "--batch: expected at least one row per part of a step (" + count(ranks, " rank", " ranks") + " x " +
            count(accumulate, " micro-batch", " micro-batches") + " = " + std::to_string(ranks * accumulate) +
            " rows), got " + std::to_string(batch));
}

}  // namespace draftlab
