#include "strategies/eagle3/draft_to_target.h"

#include <algorithm>
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

// d2t: offsets (target id = i + d2t[i]) as target ids [Vd]; required unless the draft vocabulary is the whole one
// (then undefined).
at::Tensor read_draft_ids(const SafetensorsCollection& tensors, int64_t Vd, int64_t V) {
  const std::string& source = tensors.description();
  at::Tensor ids;
  const TensorEntry* d2t = tensors.find("d2t");
  if (d2t == nullptr && Vd < V)
    throw Error::at(source, "tensor 'd2t' not found (draft_vocab_size " + std::to_string(Vd) + " < vocab_size " +
                                std::to_string(V) + " needs the draft-to-target offsets)");
  if (d2t != nullptr) {
    if ((d2t->dtype != DType::I64 && d2t->dtype != DType::I32) || d2t->shape != std::vector<int64_t>{Vd})
      throw Error::at(source, "tensor 'd2t': expected I64 " + shape_string({Vd}) + " (draft_vocab_size), got " +
                                  dtype_name(d2t->dtype) + " " + shape_string(d2t->shape));
    ids = at::empty({Vd}, at::kLong);
    int64_t* p = ids.data_ptr<int64_t>();
    for (int64_t i = 0; i < Vd; ++i) {
      int64_t offset = 0;
      if (d2t->dtype == DType::I64) {
        std::memcpy(&offset, reinterpret_cast<const char*>(d2t->data) + i * 8, 8);
      } else {
        int32_t o32 = 0;
        std::memcpy(&o32, reinterpret_cast<const char*>(d2t->data) + i * 4, 4);
        offset = o32;
      }
      p[i] = i + offset;
    }
    const std::string problem = draft_ids_problem(ids, V);
    if (!problem.empty()) throw Error::at(source, "tensor 'd2t' (offsets: target id = i + d2t[i]): " + problem);
  }
  return ids;
}

// t2d, when present, must mark exactly the ids d2t maps to (it is what training masks the teacher with).
void check_target_to_draft(const SafetensorsCollection& tensors, const at::Tensor& ids, int64_t Vd, int64_t V) {
  const std::string& source = tensors.description();
  if (const TensorEntry* t2d = tensors.find("t2d")) {
    if (t2d->dtype != DType::BOOL && t2d->dtype != DType::U8)
      throw Error::at(source, "tensor 't2d': expected BOOL " + shape_string({V}) + ", got " + dtype_name(t2d->dtype));
    if (t2d->shape != std::vector<int64_t>{V})
      throw Error::at(source, "tensor 't2d': expected shape " + shape_string({V}) + " (vocab_size), got " +
                                  shape_string(t2d->shape));
    std::vector<uint8_t> marked(static_cast<size_t>(V), 0);
    if (ids.defined())
      for (int64_t i = 0; i < Vd; ++i) marked[ids.data_ptr<int64_t>()[i]] = 1;
    else
      std::fill(marked.begin(), marked.end(), 1);
    const auto* bytes = t2d->data;
    for (int64_t v = 0; v < V; ++v)
      if ((bytes[v] != 0) != (marked[v] != 0))
        throw Error::at(source, "tensor 't2d': target id " + std::to_string(v) + " is marked " +
                                    (bytes[v] ? "in" : "out of") + " the draft vocabulary, but d2t says " +
                                    (marked[v] ? "in" : "out"));
  }
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
  const at::Tensor ids = at::arange(d2t.size(0), at::kLong) + d2t.to(at::kLong);
  const std::string problem = draft_ids_problem(ids, V);
  if (!problem.empty()) throw Error::at(path, "entry 'd2t' (offsets: target id = i + d2t[i]): " + problem);
  if (t2d.defined()) {
    if (t2d.dim() != 1 || t2d.size(0) != V || t2d.scalar_type() != at::kBool)
      throw Error::at(path, "entry 't2d': expected bool " + shape_string({V}) + " (the target's vocabulary), got " +
                                std::string(c10::toString(t2d.scalar_type())) + " " + shape_string(t2d.sizes().vec()));
    const at::Tensor marked = at::zeros({V}, at::kBool).index_fill_(0, ids, true);
    const at::Tensor differ = marked.ne(t2d).nonzero();
    if (differ.numel() > 0) {
      const int64_t v = differ[0][0].item<int64_t>();
      throw Error::at(path, "entry 't2d': target id " + std::to_string(v) + " is marked " +
                                (t2d[v].item<bool>() ? "in" : "out of") + " the draft vocabulary, but d2t says " +
                                (marked[v].item<bool>() ? "in" : "out"));
    }
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
