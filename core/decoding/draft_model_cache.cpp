#include "core/decoding/draft_model_cache.h"

#include <algorithm>
#include <utility>

namespace draftlab {

namespace {
constexpr int64_t kInitialCacheRows = 256;
}  // namespace

DraftModelCache::DraftModelCache(std::shared_ptr<const LlamaModel> draft)
    : draft_(std::move(draft)),
      context_(draft_->config().max_position_embeddings),
      cache_(draft_->make_cache(std::min(context_, kInitialCacheRows))) {}

ForwardOutput DraftModelCache::feed(const std::vector<int64_t>& tokens, const ForwardOptions& options) {
  reserve(cache_.length() + static_cast<int64_t>(tokens.size()));
  ForwardOutput out = draft_->forward_chain(cache_, tokens, options);
  fed_.insert(fed_.end(), tokens.begin(), tokens.end());
  return out;
}

void DraftModelCache::rollback_to(int64_t rows) {
  cache_.truncate(rows);
  fed_.resize(static_cast<size_t>(rows));
}

void DraftModelCache::sync_with(const std::vector<int64_t>& sequence) {
  const int64_t limit = std::min<int64_t>(cache_.length(), static_cast<int64_t>(sequence.size()) - 1);
  int64_t same = 0;
  while (same < limit && fed_[same] == sequence[same]) ++same;
  if (same < cache_.length()) rollback_to(same);
}

void DraftModelCache::reserve(int64_t rows) {
  if (rows <= cache_.capacity()) return;
  const int64_t capacity = std::min(context_, std::max(rows, 2 * cache_.capacity()));
  KvCache bigger = draft_->make_cache(capacity);
  const int64_t length = cache_.length();
  if (length > 0) {
    for (int64_t layer = 0; layer < cache_.num_layers(); ++layer)
      bigger.write(layer, 0, cache_.keys(layer, length), cache_.values(layer, length));
    bigger.advance_to(length);
  }
  cache_ = std::move(bigger);
}

}  // namespace draftlab
