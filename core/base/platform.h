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

// "OpenBLAS 0.3.21 ... core=Haswell OPENBLAS_CORETYPE=..." when OpenBLAS is the BLAS in use, else what could be
// found; ends with blas_coretype_warning() when there is one, so --verbose, benchmarks and every results file
// carry it.
std::string blas_description();

// Non-empty when the environment presets an OPENBLAS_CORETYPE without AVX-512 kernels on a CPU that has AVX-512
// (seen: OPENBLAS_CORETYPE=Haswell): OpenBLAS then runs its AVX2 kernels and the reference path's larger GEMMs
// (verifying 60 tokens) run ~25% slower. The native path does not use BLAS and is unaffected.
std::string blas_coretype_warning();

// CPU model name from /proc/cpuinfo, or "unknown".
std::string cpu_model_name();

}  // namespace draftlab
