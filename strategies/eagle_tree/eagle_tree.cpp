#include "strategies/eagle_tree/eagle_tree.h"

namespace draftlab {

std::vector<DraftTree> grow_trees(const std::vector<EagleDrafter*>& drafters, const std::vector<DraftRequest>& requests,
                                  const std::vector<TreePolicy*>& policies) {
  std::vector<DraftTree> trees(drafters.size());
  for (size_t i = 0; i < drafters.size(); ++i)
    if (policies[i]) drafters[i]->start_tree(requests[i]);
  while (true) {
    std::vector<size_t> growing;
    std::vector<EagleDrafter*> expanding;
    std::vector<const DraftTree*> grown;
    std::vector<std::vector<int32_t>> frontiers;
    for (size_t i = 0; i < drafters.size(); ++i) {
      if (!policies[i]) continue;
      std::vector<int32_t> frontier = policies[i]->next_frontier(trees[i]);
      if (frontier.empty()) continue;
      growing.push_back(i);
      expanding.push_back(drafters[i]);
      grown.push_back(&trees[i]);
      frontiers.push_back(std::move(frontier));
    }
    if (growing.empty()) return trees;
    const auto logits = EagleDrafter::expand_batch(expanding, grown, frontiers);
    for (size_t k = 0; k < growing.size(); ++k) {
      const size_t i = growing[k];
      policies[i]->grow(trees[i], logits[k], requests[i].sampler);
    }
  }
}

void EagleTreeStrategy::observe_batch(const std::vector<DraftStrategy*>& peers,
                                      const std::vector<const VerifyResult*>& results) {
  const auto strategies = peers_as<EagleTreeStrategy>(peers);
  std::vector<EagleDrafter*> drafters;
  std::vector<const VerifyResult*> drafted;
  for (size_t i = 0; i < strategies.size(); ++i) {
    if (strategies[i]->skipped_this_cycle()) {
      strategies[i]->drafter_.observe_later(*results[i]);
    } else {
      drafters.push_back(&strategies[i]->drafter_);
      drafted.push_back(results[i]);
    }
  }
  if (!drafters.empty()) EagleDrafter::observe_batch(drafters, drafted);
}

std::vector<int32_t> add_sampled_children(DraftTree& tree, int32_t parent, const at::Tensor& q, int64_t count,
                                          Sampler& sampler) {
  const int32_t q_index = tree.add_distribution(q);
  std::vector<int32_t> nodes;
  for (int64_t token : sampler.sample_without_replacement(q, count))
    nodes.push_back(tree.add(token, parent, q.data_ptr<float>()[token], q_index, /*without_replacement=*/true));
  return nodes;
}

}  // namespace draftlab
