// PackedProjections - the weights of a small draft written with libtorch ops (DFlash, P-EAGLE), packed once for the
// native kernels: libtorch's GEMM repacks a weight on every call, most of a small draft's time on the CPU.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>

#include "core/ops/packed_matrix.h"

namespace draftlab {

// x [..., in] times w [out, in] transposed. The layer functions that training and inference share take one: empty
// means at::matmul (training, with gradients); inference passes PackedProjections::bound().
using LinearProjection = std::function<at::Tensor(const at::Tensor& x, const at::Tensor& w)>;

class PackedProjections {
 public:
  // Packs w [out, in] when it is float32 on the CPU (other weights are left to at::matmul). w's storage must outlive
  // this object: the packed copy is found by it.
  void add(const at::Tensor& w);
  // w's packed copy when x is float32 on the CPU and w was packed, else at::matmul.
  at::Tensor apply(const at::Tensor& x, const at::Tensor& w) const;
  LinearProjection bound() const {
    return [this](const at::Tensor& x, const at::Tensor& w) { return apply(x, w); };
  }

 private:
  std::map<const void*, PackedMatrix> packed_;
};

}  // namespace draftlab
