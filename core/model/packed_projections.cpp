#include "core/model/packed_projections.h"

#include <vector>

namespace draftlab {

void PackedProjections::add(const at::Tensor& w) {
  if (!w.device().is_cpu() || w.scalar_type() != at::kFloat || w.dim() != 2) return;
  const at::Tensor c = w.contiguous();
  packed_.emplace(w.data_ptr(), PackedMatrix(c.data_ptr<float>(), c.size(0), c.size(1), c.size(1), 1,
                                             WeightStorage::Float32));
}

at::Tensor PackedProjections::apply(const at::Tensor& x, const at::Tensor& w) const {
  const auto it = packed_.find(w.data_ptr());
  if (it == packed_.end() || x.scalar_type() != at::kFloat || !x.device().is_cpu()) return at::matmul(x, w.t());
  const PackedMatrix& m = it->second;
  const at::Tensor rows = x.reshape({-1, m.in()}).contiguous();
  at::Tensor y = at::empty({rows.size(0), m.out()}, rows.options());
  m.multiply(rows.data_ptr<float>(), m.in(), rows.size(0), y.data_ptr<float>(), m.out(), 0, m.panels());
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = m.out();
  return y.view(shape);
}

}  // namespace draftlab
