// CPU feature probe (cpuid through the compiler's __builtin_cpu_supports, which also checks that the operating system
// enables the AVX / AVX-512 registers) and the DRAFTLAB_ISA cap, each evaluated once per process.
#include "core/base/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <string>

namespace draftlab {

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    // __builtin_cpu_supports needs a literal: one call per feature.
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    // clang 14's __builtin_cpu_supports knows neither "f16c" nor "avxvnni" (the fuzz build compiles this file
    // with clang): those two straight from cpuid, the bits gcc's builtin reads.
    unsigned a = 0, b = 0, c = 0, d = 0;
    f.f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx_vnni = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
    f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
#endif
    return f;
  }();
  return features;
}

const char* kernel_isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::Portable: return "portable";
    case KernelIsa::Avx2: return "avx2";
    case KernelIsa::Avx512: return "avx512";
  }
  return "?";
}

KernelIsa host_kernel_isa() {
  static const KernelIsa isa = [] {
    KernelIsa best = KernelIsa::Portable;
#if defined(__x86_64__)
    const CpuFeatures& f = cpu_features();
    if (f.avx2 && f.fma && f.f16c) best = KernelIsa::Avx2;
    if (best == KernelIsa::Avx2 && f.avx512f && f.avx512bw && f.avx512vl) best = KernelIsa::Avx512;
#endif
    return best;
  }();
  return isa;
}

KernelIsa best_kernel_isa() {
  static const KernelIsa isa = [] {
    KernelIsa best = host_kernel_isa();
    if (const char* cap = std::getenv("DRAFTLAB_ISA")) {
      const std::string c = cap;
      if (c == "portable") best = KernelIsa::Portable;
      else if (c == "avx2" && best == KernelIsa::Avx512) best = KernelIsa::Avx2;
    }
    return best;
  }();
  return isa;
}

}  // namespace draftlab
