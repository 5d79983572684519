// float32 <-> float16 / bfloat16, round to nearest even (what torch and numpy do); torch-free. In core/base so that
// the file readers (core/io/ggml_quant.cpp) need none of the kernels in core/ops.
#pragma once

#include <cstdint>

namespace draftlab {

uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bfloat16(float f);
float bfloat16_to_float(uint16_t b);

}  // namespace draftlab
