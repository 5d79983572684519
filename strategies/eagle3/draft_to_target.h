// The draft vocabulary of a head with its own LM head over V_d < V tokens (EAGLE-3, P-EAGLE; spec 1.5): draft index
// i is target id i + d2t[i] (d2t: int64 offsets), t2d [V] bool marks the target ids the draft can emit. In memory a
// head keeps the target ids [V_d] (ascending, unique); these read and write the two tensors of the official layout.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>

#include "core/io/safetensors.h"

namespace draftlab {

// "" when ids [V_d] int64 are unique target ids in [0, vocab), ascending (the official order); else what is wrong.
std::string draft_ids_problem(const at::Tensor& ids, int64_t vocab);

// d2t as target ids [Vd]; required unless the draft vocabulary is the whole one (then undefined). Throws Error naming
// the file when d2t is missing, mis-shaped or maps outside the vocabulary.
at::Tensor read_draft_ids(const SafetensorsCollection& tensors, int64_t Vd, int64_t V);

// t2d, when present, must mark exactly the ids d2t maps to (it is what training masks the teacher with). Throws Error
// naming the first id that disagrees.
void check_target_to_draft(const SafetensorsCollection& tensors, const at::Tensor& ids, int64_t V);

// A SpecForge vocabulary-mapping file (torch.save of a dict {"d2t": int64 [Vd] offsets, "t2d": bool [V]}, what its
// data preparation writes) as target ids [Vd], checked as above. Throws Error naming the file and the entry.
at::Tensor read_vocabulary_mapping(const std::string& path, int64_t V);

// The (d2t [Vd] int64, t2d [V] bool) tensors of target ids (undefined: the full vocabulary, Vd = V), on the CPU.
std::pair<at::Tensor, at::Tensor> draft_to_target_tensors(const at::Tensor& ids, int64_t Vd, int64_t V);

}  // namespace draftlab
