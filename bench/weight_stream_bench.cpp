// weight_stream_bench: how fast the native path's PackedMatrix kernels stream weights, against OpenBLAS's GEMV /
// GEMM on the same matrices, single thread. Not a test: prints a table, asserts nothing about time.
//
//   ./build/bench/weight_stream_bench [--dim 256 --hidden 1024 --layers 16 --vocab 4096] [--reps 31]
//
// The workload is what one forward of a Llama model of that shape multiplies (default: ts-target): per layer the
// fused QKV [3d, d], o [d, d], fused gate/up [2I, d] and down [d, I], plus the LM head [vocab, d], each once, in
// order - so the weights come from memory as they do in decoding (71 MB at float32 for ts-target, more than this
// CPU's caches). Reported per n (rows of x: 1 = decoding, more = verifying a draft tree): median milliseconds for
// the whole set and the rate at which weight bytes were consumed (GB/s). OpenBLAS runs on the layout torch uses
// (column-major W: cblas_sgemv for n = 1, cblas_sgemm above).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/base/platform.h"
#include "core/ops/packed_matrix.h"
#include "bench/fma_peak.h"

#if defined(DRAFTLAB_BENCH_HAVE_CBLAS)
#include <cblas.h>
#endif

using namespace draftlab;
using Clock = std::chrono::steady_clock;

namespace {

struct Matrix {
  int64_t out, in;
  std::vector<float> column_major;  // W [out, in] stored as [in, out] row-major (torch's layout here)
};

template <class F>
double median_ms(int reps, F&& run) {
  run();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    run();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t dim = 256, hidden = 1024, layers = 16, vocab = 4096;
  int reps = 31;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (k == "--dim") dim = v;
    else if (k == "--hidden") hidden = v;
    else if (k == "--layers") layers = v;
    else if (k == "--vocab") vocab = v;
    else if (k == "--reps") reps = static_cast<int>(v);
    else {
      std::fprintf(stderr, "weight_stream_bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  std::vector<Matrix> mats;
  auto add = [&](int64_t out, int64_t in) {
    Matrix m{out, in, std::vector<float>(static_cast<size_t>(out * in))};
    for (auto& v : m.column_major) v = dist(rng);
    mats.push_back(std::move(m));
  };
  for (int64_t l = 0; l < layers; ++l) {
    add(3 * dim, dim);
    add(dim, dim);
    add(2 * hidden, dim);
    add(dim, hidden);
  }
  add(vocab, dim);
  int64_t params = 0, widest = 0, deepest = 0;
  for (const auto& m : mats) {
    params += m.out * m.in;
    widest = std::max(widest, m.out);
    deepest = std::max(deepest, m.in);
  }

  std::printf("cpu: %s\nblas: %s\nnative kernels: %s\n", cpu_model_name().c_str(), blas_description().c_str(),
              kernel_isa_name(best_kernel_isa()));
  std::printf("workload: %ld layers of d=%ld, I=%ld, LM head %ld x %ld: %.1f M weights (%.1f MB float32), one thread,"
              " median of %d\n\n", (long)layers, (long)dim, (long)hidden, (long)vocab, (long)dim, params / 1e6,
              params * 4 / 1e6, reps);

  // The floor: how fast one core reads memory at all (a sum over 256 MB, far past the caches, as float32 vectors).
  {
    std::vector<float> big(static_cast<size_t>(64) << 20, 1.0f);
    volatile float sink = 0.0f;
    const double ms = median_ms(5, [&] {
      float lanes[16] = {};
      for (size_t i = 0; i + 16 <= big.size(); i += 16)
        for (int c = 0; c < 16; ++c) lanes[c] += big[i + c];
      sink = sink + lanes[0] + lanes[15];
    });
    std::printf("memory read floor: %.1f GB/s (sum over 256 MB, one thread); a forward streaming this workload's "
                "float32 weights at that rate takes %.2f ms, float16 %.2f ms\n\n",
                big.size() * 4.0 / (ms * 1e-3) / 1e9, params * 4.0 / (big.size() * 4.0 / ms),
                params * 2.0 / (big.size() * 4.0 / ms));
  }

  const int64_t max_n = 64;
  std::vector<float> x(static_cast<size_t>(max_n * deepest)), y(static_cast<size_t>(max_n * widest));
  for (auto& v : x) v = dist(rng);

  // Roofline: each cell also gives the products' rate as a share of the FMA peak of the kernel's vectors.
  std::vector<KernelIsa> isas{best_kernel_isa()};
  if (best_kernel_isa() == KernelIsa::Avx512) isas.push_back(KernelIsa::Avx2);
  std::vector<double> peak(3, 0.0);
  for (KernelIsa isa : isas) {
    peak[static_cast<int>(isa)] = bench::measured_fma_peak_gflops(isa);
    std::printf("FMA peak of one core with %s vectors (measured): %.1f GFLOP/s\n", kernel_isa_name(isa),
                peak[static_cast<int>(isa)]);
  }
  std::printf("cells: median ms, weight bytes consumed per second, GFLOP/s as %% of that peak\n\n");
  std::printf("%-36s", "kernel \\ n");
  const std::vector<int64_t> ns{1, 2, 4, 8, 16, 32, 64};
  for (int64_t n : ns) std::printf(" %21ld", (long)n);
  std::printf("\n");
  auto row = [&](const char* name, double bytes, double peak_gflops, auto&& run_n) {
    std::printf("%-36s", name);
    for (int64_t n : ns) {
      const double ms = median_ms(reps, [&] { run_n(n); });
      const double gflops = 2.0 * params * n / (ms * 1e-3) / 1e9;
      std::printf(" %7.3f ms %4.1fGB/s", ms, bytes / (ms * 1e-3) / 1e9);
      if (peak_gflops > 0) std::printf(" %3.0f%%", 100.0 * gflops / peak_gflops);
      else std::printf("     ");
    }
    std::printf("\n");
    std::fflush(stdout);
  };

  struct Format {
    WeightStorage storage;
    BlockDot dot;
  };
  for (const Format f : {Format{WeightStorage::Float32, BlockDot::Float}, Format{WeightStorage::Float16, BlockDot::Float},
                         Format{WeightStorage::BFloat16, BlockDot::Float}, Format{WeightStorage::Q8_0, BlockDot::Float},
                         Format{WeightStorage::Q8_0, BlockDot::Int8}, Format{WeightStorage::Q4_0, BlockDot::Float},
                         Format{WeightStorage::Q4_0, BlockDot::Int8}}) {
    std::vector<PackedMatrix> packed;
    for (const auto& m : mats) packed.emplace_back(m.column_major.data(), m.out, m.in, 1, m.out, f.storage, f.dot);
    double bytes = 0;
    for (const auto& p : packed) bytes += static_cast<double>(p.bytes());
    for (KernelIsa isa : isas) {
      std::string name = std::string("packed ") + weight_storage_name(f.storage) + " " + kernel_isa_name(isa);
      if (f.dot == BlockDot::Int8) name += std::string(" ") + int8_dot_instruction(isa);
      // Int8 cells: the GFLOP/s share is of the float FMA peak (integer products count as 2 operations each).
      row(name.c_str(), bytes, peak[static_cast<int>(isa)], [&](int64_t n) {
        for (const auto& p : packed) p.multiply(x.data(), p.in(), n, y.data(), p.out(), 0, p.panels(), isa);
      });
    }
  }
#if defined(DRAFTLAB_BENCH_HAVE_CBLAS)
  row("openblas float32 (torch layout)", params * 4.0, 0.0, [&](int64_t n) {
    for (const auto& m : mats) {
      if (n == 1)
        cblas_sgemv(CblasColMajor, CblasNoTrans, m.out, m.in, 1.0f, m.column_major.data(), m.out, x.data(), 1, 0.0f,
                    y.data(), 1);
      else
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m.out, n, m.in, 1.0f, m.column_major.data(), m.out,
                    x.data(), m.in, 0.0f, y.data(), m.out);
    }
  });
#else
  std::printf("(OpenBLAS's cblas.h not found at build time: no BLAS row)\n");
#endif
  return 0;
}
