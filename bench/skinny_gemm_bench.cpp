// skinny_gemm_f32 against OpenBLAS for the weight shapes of small Llama models, single thread.
// Not a test: prints a table, asserts nothing about time.
//
//   OPENBLAS_NUM_THREADS=1 ./build/bench/skinny_gemm_bench [--reps N] [--rows 1,2,4,8,16] [--portable]
//                                                          [--stat median|min]
//
// For every weight W [out, in] (stored as Wt [in, out] row-major, the layout skinny_gemm_f32 takes) and every n:
// median time over the full output range, cold (a 64 MB buffer is touched before each run so W comes from DRAM)
// and hot (W already in cache where it fits), the ratio to n = 1, and the weight streaming rate in GB/s.
// The BLAS columns use the same layout: n = 1 is cblas_sgemv(ColMajor, NoTrans, out, in, Wt, lda = out), n > 1 is
// cblas_sgemm(ColMajor, NoTrans, NoTrans, out, n, in, Wt, out, x, in) - i.e. Yᵀ = W · Xᵀ, what torch calls.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/base/platform.h"
#include "core/ops/skinny_gemm.h"

#if defined(DRAFTLAB_BENCH_HAVE_CBLAS)
#include <cblas.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  int64_t out, in;
  const char* what;
};

struct AlignedBuffer {
  explicit AlignedBuffer(size_t floats) : size(floats) {
    const size_t bytes = ((floats * sizeof(float) + 63) / 64) * 64;
    data = static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)));
  }
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  float* data;
  size_t size;
};

// Touching 64 MB (twice the 32 MB L3) before a run evicts the weights from every cache level.
class Evictor {
 public:
  Evictor() : buf_(64u << 20) { std::memset(buf_.data(), 1, buf_.size()); }
  void run() {
    for (size_t i = 0; i < buf_.size(); i += 64) buf_[i] = static_cast<char>(buf_[i] + 1);
  }

 private:
  std::vector<char> buf_;
};

bool g_use_min = false;  // --stat min: best run instead of the median (robust when other jobs share the CPU)

double median_or_min(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (g_use_min) return v.front();
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Median (or min) milliseconds of fn over reps runs; cold: evict before each run.
double time_ms(const std::function<void()>& fn, int reps, bool cold, Evictor& evictor) {
  std::vector<double> t;
  fn();  // warm-up (page faults, BLAS buffers)
  for (int r = 0; r < reps; ++r) {
    if (cold) evictor.run();
    const auto t0 = Clock::now();
    fn();
    const auto t1 = Clock::now();
    t.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return median_or_min(t);
}

std::vector<int64_t> parse_rows(const char* s) {
  std::vector<int64_t> rows;
  std::string str(s);
  size_t pos = 0;
  while (pos < str.size()) {
    size_t comma = str.find(',', pos);
    if (comma == std::string::npos) comma = str.size();
    rows.push_back(std::stoll(str.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  return rows;
}

void set_blas_single_thread() {
  using SetFn = void (*)(int);
  if (auto set = reinterpret_cast<SetFn>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(1);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 21;
  bool portable = false;
  std::vector<int64_t> rows = {1, 2, 4, 8, 16};
  for (int a = 1; a < argc; ++a) {
    if (!std::strcmp(argv[a], "--reps") && a + 1 < argc) {
      reps = std::atoi(argv[++a]);
    } else if (!std::strcmp(argv[a], "--rows") && a + 1 < argc) {
      rows = parse_rows(argv[++a]);
    } else if (!std::strcmp(argv[a], "--portable")) {
      portable = true;
    } else if (!std::strcmp(argv[a], "--stat") && a + 1 < argc) {
      g_use_min = !std::strcmp(argv[++a], "min");
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--rows 1,2,4,8,16] [--portable] [--stat median|min]\n", argv[0]);
      return 2;
    }
  }
  set_blas_single_thread();
  const auto gemm = portable ? draftlab::skinny_gemm_f32_portable : draftlab::skinny_gemm_f32;

  std::printf("cpu: %s\n", draftlab::cpu_model_name().c_str());
  std::printf("skinny path: %s   max_rows: %lld   reps: %d (%s)\n",
              portable ? "portable (forced)" : draftlab::skinny_gemm_isa(),
              static_cast<long long>(draftlab::skinny_gemm_max_rows()), reps, g_use_min ? "min" : "median");
#if defined(DRAFTLAB_BENCH_HAVE_CBLAS)
  std::printf("blas: %s   threads: 1 (openblas_set_num_threads; OPENBLAS_NUM_THREADS=%s)\n",
              draftlab::blas_description().c_str(),
              std::getenv("OPENBLAS_NUM_THREADS") ? std::getenv("OPENBLAS_NUM_THREADS") : "unset");
#else
  std::printf("blas: not linked (no cblas.h at build time); skinny columns only\n");
#endif

  const std::vector<Shape> shapes = {{32000, 288, "lm head 288"},
                                     {1536, 288, "gate/up 288"},
                                     {288, 768, "down 288"},
                                     {4096, 512, "4096x512"},
                                     {2048, 1024, "2048x1024"}};
  int64_t max_n = 1;
  for (int64_t n : rows) max_n = std::max(max_n, n);

  Evictor evictor;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);

  for (const Shape& s : shapes) {
    const int64_t k = s.in, out = s.out;
    AlignedBuffer w(static_cast<size_t>(k * out)), x(static_cast<size_t>(max_n * k));
    AlignedBuffer y(static_cast<size_t>(max_n * out)), y_ref(static_cast<size_t>(max_n * out));
    for (size_t i = 0; i < w.size; ++i) w.data[i] = dist(rng);
    for (size_t i = 0; i < x.size; ++i) x.data[i] = dist(rng);
    const double mb = static_cast<double>(k * out) * sizeof(float) / 1e6;

    std::printf("\n== W %lld x %lld (%s), %.1f MB ==\n", static_cast<long long>(out), static_cast<long long>(k), s.what,
                mb);
    std::printf("%4s | %9s %6s %6s | %9s %6s %6s | %9s %6s | %9s %6s | %7s %7s\n", "n", "skin cold", "xn=1", "GB/s",
                "skin hot", "xn=1", "GB/s", "blas cold", "xn=1", "blas hot", "xn=1", "cold x", "hot x");
    double base[4] = {0, 0, 0, 0};
    for (int64_t n : rows) {
      auto skinny = [&] { gemm(x.data, k, w.data, out, y.data, out, n, k, 0, out); };
      double t[4];
      t[0] = time_ms(skinny, reps, true, evictor);
      t[1] = time_ms(skinny, reps, false, evictor);
#if defined(DRAFTLAB_BENCH_HAVE_CBLAS)
      auto blas = [&] {
        if (n == 1) {
          cblas_sgemv(CblasColMajor, CblasNoTrans, static_cast<int>(out), static_cast<int>(k), 1.0f, w.data,
                      static_cast<int>(out), x.data, 1, 0.0f, y.data, 1);
        } else {
          cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(out), static_cast<int>(n),
                      static_cast<int>(k), 1.0f, w.data, static_cast<int>(out), x.data, static_cast<int>(k), 0.0f,
                      y.data, static_cast<int>(out));
        }
      };
      t[2] = time_ms(blas, reps, true, evictor);
      t[3] = time_ms(blas, reps, false, evictor);
      // Sanity: both computed the same thing (y holds BLAS's result now).
      std::copy(y.data, y.data + n * out, y_ref.data);
      skinny();
      double worst = 0.0;
      for (int64_t i = 0; i < n * out; ++i) {
        const double ref = y_ref.data[i];
        worst = std::max(worst, std::fabs(y.data[i] - ref) / (1.0 + std::fabs(ref)));
      }
      if (worst > 1e-3) {
        std::printf("WARNING: skinny and BLAS differ by %.3g at n = %lld\n", worst, static_cast<long long>(n));
      }
#else
      t[2] = t[3] = NAN;
#endif
      if (n == rows.front()) std::copy(t, t + 4, base);
      std::printf("%4lld | %9.3f %6.2f %6.1f | %9.3f %6.2f %6.1f | %9.3f %6.2f | %9.3f %6.2f | %7.2f %7.2f\n",
                  static_cast<long long>(n), t[0], t[0] / base[0], mb / t[0], t[1], t[1] / base[1], mb / t[1], t[2],
                  t[2] / base[2], t[3], t[3] / base[3], t[2] / t[0], t[3] / t[1]);
    }
  }
  std::printf("\nms: %s per call. xn=1: time / time at the first n. GB/s: weight bytes / time.\n"
              "cold x / hot x: BLAS time / skinny time (> 1: skinny is faster).\n", g_use_min ? "min" : "median");
  return 0;
}
