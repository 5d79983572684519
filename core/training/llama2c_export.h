// Export to llama2.c's legacy v0 checkpoint (.bin, float32; layout in core/io/llama2c_checkpoint.h), so a model
// trained here runs in Karpathy's run.c and loads back through LlamaModel::load.
#pragma once

#include <string>

#include "core/model/llama_model.h"

namespace draftlab {

// Writes `path` atomically. q/k rows go back from the halves RoPE convention to llama2.c's consecutive pairs.
// Throws Error when the model does not fit the format: head_dim other than hidden/heads, rope_theta other than
// 10000, rope scaling, or rms_norm_eps other than 1e-5 (run.c hard-codes those).
void export_llama2c(const LlamaModel& model, const std::string& path);

}  // namespace draftlab
