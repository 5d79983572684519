#include "core/model/feature_head.h"

#include "core/model/head_rows.h"

namespace draftlab {

at::Tensor FeatureHead::forward_visible(KvCache& cache, const at::Tensor& tokens, const at::Tensor& features,
                                        const at::Tensor& positions, const at::Tensor& visible) const {
  return forward_batch({Rows{&cache, tokens, features, positions, visible}})[0];
}

at::Tensor FeatureHead::forward(KvCache& cache, const at::Tensor& tokens, const at::Tensor& features,
                                const at::Tensor& positions, const at::Tensor& ancestor_mask) const {
  return forward_visible(cache, tokens, features, positions, visible_from_ancestors(cache, tokens.size(0), ancestor_mask));
}

}  // namespace draftlab
