// The one place that asks the CPU what it runs: the x86 features the kernels in core/ops choose by, probed once per
// process, and the kernel ISA in force (the best the CPU runs, capped by DRAFTLAB_ISA). Kernel files ask here and
// never probe the CPU themselves.
#pragma once

namespace draftlab {

// What this CPU (and its operating system, which must save the wider registers) supports, DRAFTLAB_ISA aside. All
// false on other architectures.
struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx_vnni = false;     // AVX-VNNI: vpdpbusd in its VEX encoding (256-bit)
  bool avx512_vnni = false;  // AVX512-VNNI
};

// Probed on the first call, then the same answer for the life of the process.
const CpuFeatures& cpu_features();

// The instruction sets a kernel can use.
enum class KernelIsa { Portable, Avx2, Avx512 };
// "portable" / "avx2" / "avx512".
const char* kernel_isa_name(KernelIsa isa);

// The best this CPU runs, DRAFTLAB_ISA aside: AVX-512 (F + BW + VL, on top of the AVX2 level), else AVX2 (with FMA and
// F16C), else portable C++ (always, where the kernels are not built for x86-64).
KernelIsa host_kernel_isa();

// The ISA in force: host_kernel_isa() capped by DRAFTLAB_ISA (read once per process). DRAFTLAB_ISA=portable gives
// portable; DRAFTLAB_ISA=avx2 gives AVX2 where the CPU has AVX-512; any other value, or a cap at or above what the
// CPU runs, changes nothing.
KernelIsa best_kernel_isa();

}  // namespace draftlab
