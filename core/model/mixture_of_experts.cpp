#include "core/model/mixture_of_experts.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/base/error.h"

namespace draftlab {

at::Tensor mixture_of_experts(const at::Tensor& x, const LlamaLayerWeights& L, const ModelConfig& c,
                              const Projection& project, at::Tensor* router_logits, int64_t* experts_read) {
  const int64_t E = c.num_local_experts, k = c.num_experts_per_tok, I = c.intermediate_size;
  check(L.router.defined() && static_cast<int64_t>(L.expert_gate_up.size()) == E &&
            static_cast<int64_t>(L.expert_down.size()) == E,
        "mixture_of_experts: the layer has no router or not num_local_experts experts");
  const auto logits = project(x, L.router);  // [rows, E]
  if (router_logits) *router_logits = logits;
  const auto probs = at::softmax(logits, -1, at::kFloat);
  const auto [top_p, top_i] = probs.topk(k, -1);                        // [rows, k], most probable first
  const auto weights = (top_p / top_p.sum(-1, /*keepdim=*/true)).to(x.scalar_type());

  // Experts in ascending index, each over the rows that chose it (one pass over its weights for all of them).
  auto out = at::zeros_like(x);
  const auto chosen = (top_i.unsqueeze(-1) == at::arange(E, top_i.options()).view({1, 1, E}));  // [rows, k, E]
  const auto used = chosen.any(1).any(0).to(at::kCPU);                                         // [E]
  const bool* used_p = used.data_ptr<bool>();
  for (int64_t e = 0; e < E; ++e) {
    if (!used_p[e]) continue;
    if (experts_read) ++*experts_read;
    const auto where = at::nonzero(chosen.select(2, e));  // [m, 2]: (row, slot)
    const auto rows = where.select(1, 0), slots = where.select(1, 1);
    const auto gate_up = project(x.index_select(0, rows), L.expert_gate_up[e]);
    const auto y = project(at::silu(gate_up.narrow(1, 0, I)) * gate_up.narrow(1, I, I), L.expert_down[e]);
    out = out.index_add(0, rows, y * weights.reshape({-1}).index_select(0, rows * k + slots).unsqueeze(1));
  }
  return out;
}

void route_rows(const float* logits, int64_t rows, int64_t E, int64_t k, int32_t* experts, float* weights) {
  // Scratch kept per thread: the native path's forwards allocate nothing once warm.
  thread_local std::vector<float> p;
  thread_local std::vector<int32_t> order;
  p.resize(static_cast<size_t>(E));
  order.resize(static_cast<size_t>(E));
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits + r * E;
    const float top = *std::max_element(l, l + E);
    float sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(l[e] - top);
    for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    // The k most probable, ties to the lower index, most probable first (the order their sum is taken in).
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float chosen_sum = 0;
    for (int64_t s = 0; s < k; ++s) chosen_sum += p[order[s]];
    std::sort(order.begin(), order.begin() + k);  // ascending index: the order outputs are accumulated in
    for (int64_t s = 0; s < k; ++s) {
      experts[r * k + s] = order[s];
      weights[r * k + s] = p[order[s]] / chosen_sum;
    }
  }
}

at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t E, int64_t k) {
  check(!router_logits.empty(), "load_balancing_loss: no router logits");
  const auto logits = at::cat(router_logits, 0);  // [N, E]
  const auto probs = at::softmax(logits, -1, at::kFloat);
  const auto selected = std::get<1>(probs.topk(k, -1));  // [N, k]
  const auto mask = at::one_hot(selected, E).to(at::kFloat);  // [N, k, E]
  const auto tokens_per_expert = mask.mean(0);  // [k, E]
  const auto probability_per_expert = probs.mean(0);  // [E]
  return (tokens_per_expert * probability_per_expert.unsqueeze(0)).sum() * static_cast<double>(E);
}

}  // namespace draftlab
