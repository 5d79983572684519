// DraftModelCache - a draft language model's KV cache that mirrors a prefix of the sequence being decoded: the
// tokens it has fed, rolled back when the verifier rejects them. Draft-model strategies (chain, pard) keep one per
// sequence. The cache starts small and doubles on demand, up to the draft's context, so that a draft with a huge
// max_position_embeddings (e.g. 131072) does not allocate gigabytes for short generations.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/model/llama_model.h"

namespace draftlab {

class DraftModelCache {
 public:
  explicit DraftModelCache(std::shared_ptr<const LlamaModel> draft);

  const LlamaModel& model() const { return *draft_; }
  int64_t context() const { return context_; }  // the draft's max_position_embeddings
  int64_t length() const { return cache_.length(); }
  const std::vector<int64_t>& fed() const { return fed_; }  // the tokens whose rows it holds, in order

  // Runs tokens through the draft after the cached rows (growing the cache as needed) and returns the forward's
  // output (its logits as `options` ask). Throws Error past the draft's context.
  ForwardOutput feed(const std::vector<int64_t>& tokens, const ForwardOptions& options);
  // Keeps the first `rows` rows (rows <= length()).
  void rollback_to(int64_t rows);
  // Keeps only the cached rows that are a prefix of `sequence`, and never the row of its last token (the root,
  // whose logits the next draft needs). After a regular verification this drops nothing; it keeps a strategy
  // correct when a caller hands it a sequence that did not come from the last verification.
  void sync_with(const std::vector<int64_t>& sequence);

 private:
  void reserve(int64_t rows);

  std::shared_ptr<const LlamaModel> draft_;
  int64_t context_;
  KvCache cache_;
  std::vector<int64_t> fed_;
};

}  // namespace draftlab
