// Process-level set-up that must happen before any BLAS call, and a description of the machine for logs.
#pragma once

#include <cstdint>
#include <string>

namespace draftlab {

// Environment that libraries read when they are loaded, i.e. before main(), so setting it later is useless: when
// something below is unset, this sets it and re-executes the program (once). Call first thing in main().
// Returns normally when nothing needed doing. Whatever the user set is kept.
//  - OPENBLAS_CORETYPE=SkylakeX on a CPU with AVX-512F: OpenBLAS 0.3.21 misdetects some AVX-512 CPUs and falls
//    back to slow kernels (without AVX-512 nothing is set: SkylakeX kernels would die with an illegal instruction).
//  - OMP_WAIT_POLICY=PASSIVE when more than one thread is asked for (--threads N >= 2 or OMP_NUM_THREADS >= 2):
//    libgomp's threads otherwise spin for hundreds of microseconds after each of libtorch's parallel regions and
//    take the core the native path's WorkerPool needs next (two threads: EAGLE-2 6/4/2 ran at 0.33x vanilla with
//    spinning, 1.18x without). With one thread nothing spins, and the re-execution (it loads libtorch twice:
//    +0.6 s) is skipped. Training and the reference path lose a little to thread wake-ups; set
//    OMP_WAIT_POLICY=ACTIVE to have them spin. A libtorch default of several threads (no --threads, a many-core
//    machine) is not detected: set OMP_WAIT_POLICY=PASSIVE there.
void prepare_process_environment(int argc, char** argv);

bool cpu_has_avx512f();

// "OpenBLAS 0.3.21 ... core=Haswell OPENBLAS_CORETYPE=..." when OpenBLAS is the BLAS in use, else what could be
// found; ends with blas_coretype_warning() when there is one, so --verbose, benchmarks and every results file
// carry it.
std::string blas_description();

// Non-empty when the environment presets an OPENBLAS_CORETYPE without AVX-512 kernels on a CPU that has AVX-512
// (seen: OPENBLAS_CORETYPE=Haswell): OpenBLAS then runs its AVX2 kernels and the reference path's larger GEMMs
// (verifying 60 tokens) run ~25% slower. The native path does not use BLAS and is unaffected.
std::string blas_coretype_warning();

// Gives freed heap memory back to the operating system (glibc's malloc_trim; a no-op elsewhere). glibc only
// returns the top of the heap by itself, so memory freed below live allocations stays resident without this.
void return_free_memory_to_os();

// For training: freed memory stays in the process for the next step. glibc serves every allocation above its
// largest mmap threshold (32 MB) by a fresh mmap and unmaps it on free, so a step's large activations (attention
// scores, logits over the vocabulary) fault their pages in again on every step: P-EAGLE's trainer spent a third of
// its time in the kernel (5 steps: sys 55 s of 162 s; with this 7 s of 83 s). Serves every allocation from the heap
// (M_MMAP_MAX 0) and never trims it (M_TRIM_THRESHOLD); a no-op without glibc. Call before the first allocation.
void keep_freed_memory_for_training();

// This process's resident memory now and at its peak (VmRSS / VmHWM of /proc/self/status; 0 where unknown).
int64_t resident_memory_bytes();
int64_t peak_resident_memory_bytes();

// CPU model name from /proc/cpuinfo, or "unknown".
std::string cpu_model_name();

}  // namespace draftlab
