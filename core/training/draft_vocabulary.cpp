#include "core/training/draft_vocabulary.h"

#include <string>
#include <tuple>

#include "core/base/error.h"

namespace draftlab {

namespace {

void check_size(int64_t k, int64_t vocab, int64_t lowest) {
  check(k >= lowest && k <= vocab, [&] {
    return "--draft-vocab: expected " + std::to_string(lowest) + ".." + std::to_string(vocab) +
           " (the target's vocabulary), got " + std::to_string(k);
  });
}

// The k ids with the largest counts [vocab], ties to the lower id, sorted by id.
at::Tensor top_ids(const at::Tensor& counts, int64_t k) {
  // Stable descending sort by count: equal counts keep id order, so ties go to the lower id.
  const auto order = std::get<1>(counts.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  return std::get<0>(order.narrow(0, 0, k).sort());
}

}  // namespace

at::Tensor most_frequent_tokens(const std::vector<at::Tensor>& tokens, int64_t vocab, int64_t k) {
  check_size(k, vocab, 1);
  auto counts = at::zeros({vocab}, at::kDouble);
  for (const auto& t : tokens) counts += at::bincount(t.to(at::kCPU).flatten(), {}, vocab).to(at::kDouble);
  return top_ids(counts, k);
}

at::Tensor training_draft_vocabulary(const TextDataset& data, const HeadTrainingOptions& o, int64_t vocab, int64_t k,
                                     DraftVocabularyCount count) {
  check_size(k, vocab, 0);
  if (k == 0 || k == vocab) return {};
  auto counts = at::zeros({vocab}, at::kDouble);  // exact for any count below 2^53
  for (int64_t step = 0; step < o.trainer.steps; ++step) {
    const RowBatch r = data.train_rows(o.batch, o.context, o.seed, step);
    if (count == DraftVocabularyCount::RealTokens) {
      for (int64_t b = 0; b < r.tokens.size(0); ++b)
        counts += at::bincount(r.tokens[b].narrow(0, 0, r.lengths[b].item<int64_t>()), {}, vocab).to(at::kDouble);
    } else {
      const auto predicted = r.tokens.narrow(1, 1, o.context).flatten().to(at::kLong);
      at::Tensor weights;
      if (r.mask.defined()) weights = r.mask.narrow(1, 1, o.context).flatten().to(at::kDouble);
      counts += at::bincount(predicted, weights, vocab).to(at::kDouble);
    }
  }
  return top_ids(counts, k);
}

}  // namespace draftlab
