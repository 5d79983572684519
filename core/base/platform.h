// Process-level set-up that must happen before any BLAS call, and a description of the machine for logs.
#pragma once

#include <string>

namespace draftlab {

// OpenBLAS 0.3.21 misdetects some AVX-512 CPUs and falls back to slow kernels; OPENBLAS_CORETYPE=SkylakeX fixes
// it. OpenBLAS reads the variable when the library is loaded, i.e. before main(), so setting it later is useless:
// if the CPU supports AVX-512F and the variable is unset, this sets it and re-executes the program (once).
// On a CPU without AVX-512 it does nothing (SkylakeX kernels would die with an illegal instruction).
// Call first thing in main(). Returns normally when nothing needed doing.
void ensure_blas_coretype(int argc, char** argv);

bool cpu_has_avx512f();

// "OpenBLAS 0.3.21 ... core=Haswell" when OpenBLAS is the BLAS in use, else what could be found.
std::string blas_description();

// CPU model name from /proc/cpuinfo, or "unknown".
std::string cpu_model_name();

}  // namespace draftlab
