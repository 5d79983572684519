#include "strategies/eagle3/draft_to_target.h"

#include <cstring>
#include <vector>

#include "core/base/error.h"
#include "core/model/checkpoint_tensor.h"
#include "core/model/torch_checkpoint.h"

namespace draftlab {

// "" when ids [V_d] int64 are unique target ids in [0, vocab), ascending (the official order); else what is wrong.
std::string draft_ids_problem(const at::Tensor& ids, int64_t vocab) {
  if (ids.dim() != 1 || ids.scalar_type() != at::kLong) return "expected a 1-D int64 tensor";
  const int64_t K = ids.size(0);
  if (K < 1 || K > vocab) return "size " + std::to_string(K) + " outside [1, vocab_size " + std::to_string(vocab) + "]";
  const auto c = ids.to(at::kCPU).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  for (int64_t i = 0; i < K; ++i) {
    if (p[i] < 0 || p[i] >= vocab)
      return "draft index " + std::to_string(i) + " maps to target id " + std::to_string(p[i]) + ", outside [0, " +
             std::to_string(vocab) + ")";
    if (i > 0 && p[i] <= p[i - 1])
      return "draft index " + std::to_string(i) + " maps to target id " + std::to_string(p[i]) +
             ", not above the previous one (" + std::to_string(p[i - 1]) + "): the draft vocabulary must be unique "
             "target ids in ascending order";
  }
  return "";
}

namespace {

// d2t offsets [Vd] (target id = i + d2t[i]) as target ids, checked; `what` names the tensor in messages.
at::Tensor ids_from_offsets(const at::Tensor& d2t, int64_t V, const std::string& source, const std::string& what) {
  const at::Tensor ids = at::arange(d2t.size(0), at::kLong) + d2t.to(at::kLong);
  const std::string problem = draft_ids_problem(ids, V);
  if (!problem.empty()) throw Error::at(source, what + " (offsets: target id = i + d2t[i]): " + problem);
  return ids;
}

// t2d [V] (bool) must mark exactly the ids d2t maps to (undefined ids: every id).
void check_marks(const at::Tensor& t2d, const at::Tensor& ids, int64_t V, const std::string& source,
                 const std::string& what) {
  const at::Tensor marked = ids.defined() ? at::zeros({V}, at::kBool).index_fill_(0, ids, true) : at::ones({V}, at::kBool);
  const at::Tensor differ = marked.ne(t2d).nonzero();
  if (differ.numel() == 0) return;
  const int64_t v = differ[0][0].item<int64_t>();
  throw Error::at(source, what + ": target id " + std::to_string(v) + " is marked " +
                              (t2d[v].item<bool>() ? "in" : "out of") + " the draft vocabulary, but d2t says " +
                              (marked[v].item<bool>() ? "in" : "out"));
}

// A stored tensor's bytes (any alignment) as a CPU tensor of `dtype`.
at::Tensor copy_of(const TensorEntry& e, at::ScalarType dtype) {
  at::Tensor t = at::empty(e.shape, dtype);
  std::memcpy(t.data_ptr(), e.data, e.nbytes);
  return t;
}

}  // namespace

at::Tensor read_draft_ids(const SafetensorsCollection& tensors, int64_t Vd, int64_t V) {
  const std::string& source = tensors.description();
  const TensorEntry* d2t = tensors.find("d2t");
  if (d2t == nullptr && Vd < V)
    throw Error::at(source, "tensor 'd2t' not found (draft_vocab_size " + std::to_string(Vd) + " < vocab_size " +
                                std::to_string(V) + " needs the draft-to-target offsets)");
  if (d2t == nullptr) return {};
  if ((d2t->dtype != DType::I64 && d2t->dtype != DType::I32) || d2t->shape != std::vector<int64_t>{Vd})
    throw Error::at(source, "tensor 'd2t': expected I64 " + shape_string({Vd}) + " (draft_vocab_size), got " +
                                dtype_name(d2t->dtype) + " " + shape_string(d2t->shape));
  return ids_from_offsets(copy_of(*d2t, d2t->dtype == DType::I64 ? at::kLong : at::kInt), V, source, "tensor 'd2t'");
}

void check_target_to_draft(const SafetensorsCollection& tensors, const at::Tensor& ids, int64_t V) {
  const std::string& source = tensors.description();
  const TensorEntry* t2d = tensors.find("t2d");
  if (t2d == nullptr) return;
  if (t2d->dtype != DType::BOOL && t2d->dtype != DType::U8)
    throw Error::at(source, "tensor 't2d': expected BOOL " + shape_string({V}) + ", got " + dtype_name(t2d->dtype));
  if (t2d->shape != std::vector<int64_t>{V})
    throw Error::at(source, "tensor 't2d': expected shape " + shape_string({V}) + " (vocab_size), got " +
                                shape_string(t2d->shape));
  check_marks(copy_of(*t2d, at::kByte).ne(0), ids, V, source, "tensor 't2d'");
}

at::Tensor read_vocabulary_mapping(const std::string& path, int64_t V) {
  at::Tensor d2t, t2d;
  for (auto& [name, t] : read_torch_state_dict(path)) {
    if (name == "d2t") d2t = t;
    else if (name == "t2d") t2d = t;
    else throw Error::at(path, "unexpected entry '" + name + "' (a vocabulary mapping holds d2t and t2d)");
  }
  if (!d2t.defined()) throw Error::at(path, "no entry 'd2t' (the draft-to-target offsets, int64 [draft vocabulary])");
  if (d2t.dim() != 1 || (d2t.scalar_type() != at::kLong && d2t.scalar_type() != at::kInt))
    throw Error::at(path, "entry 'd2t': expected a 1-D int64 tensor, got " + std::string(c10::toString(d2t.scalar_type())) +
                              " " + shape_string(d2t.sizes().vec()));
  const at::Tensor ids = ids_from_offsets(d2t, V, path, "entry 'd2t'");
  if (t2d.defined()) {
    if (t2d.dim() != 1 || t2d.size(0) != V || t2d.scalar_type() != at::kBool)
      throw Error::at(path, "entry 't2d': expected bool " + shape_string({V}) + " (the target's vocabulary), got " +
                                std::string(c10::toString(t2d.scalar_type())) + " " + shape_string(t2d.sizes().vec()));
    check_marks(t2d, ids, V, path, "entry 't2d'");
  }
  return ids;
}

std::pair<at::Tensor, at::Tensor> draft_to_target_tensors(const at::Tensor& ids, int64_t Vd, int64_t V) {
  at::Tensor d2t = ids.defined() ? (ids.to(at::kCPU) - at::arange(Vd, at::kLong)).contiguous() : at::zeros({Vd}, at::kLong);
  at::Tensor t2d = at::zeros({V}, at::kBool);
  if (ids.defined()) t2d.index_fill_(0, ids.to(at::kCPU), true); else t2d.fill_(true);
  return {d2t, t2d};
}

}  // namespace draftlab
