#include "core/model/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/base/error.h"

namespace draftlab {

PerplexityResult perplexity(const LlamaModel& model, const std::vector<int64_t>& tokens, int64_t context) {
  check(tokens.size() >= 2, "perplexity: need at least 2 tokens");
  context = std::min(context, model.config().max_position_embeddings);
  check(context >= 2, "perplexity: context must be at least 2");
  double nll = 0.0;
  int64_t count = 0;
  const auto total = static_cast<int64_t>(tokens.size());
  for (int64_t start = 0; start + 1 < total; start += context) {
    const int64_t n = std::min(context, total - start);
    if (n < 2) break;
    std::vector<int64_t> window(tokens.begin() + start, tokens.begin() + start + n);
    KvCache cache = model.make_cache(n);
    auto logits = model.forward_chain(cache, window).logits;  // [n, vocab] float32
    auto logp = at::log_softmax(logits.narrow(0, 0, n - 1), 1);
    auto targets = at::tensor(std::vector<int64_t>(window.begin() + 1, window.end()), at::kLong);
    nll -= logp.gather(1, targets.unsqueeze(1).to(logp.device())).sum().item<double>();
    count += n - 1;
  }
  PerplexityResult r;
  r.predicted_tokens = count;
  r.mean_nll = nll / static_cast<double>(count);
  r.perplexity = std::exp(r.mean_nll);
  return r;
}

}  // namespace draftlab
