#include "core/base/platform.h"

#include "core/base/cpu_features.h"

#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace draftlab {

bool cpu_has_avx512f() { return cpu_features().avx512f; }

namespace {
// More than one thread asked for: --threads N / --threads=N with N >= 2 on the command line, or OMP_NUM_THREADS >= 2.
bool asks_for_threads(int argc, char** argv) {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    if (std::atoi(env) >= 2) return true;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc && std::atoi(argv[i + 1]) >= 2) return true;
    if (a.rfind("--threads=", 0) == 0 && std::atoi(a.c_str() + 10) >= 2) return true;
  }
  return false;
}
}  // namespace

void prepare_process_environment(int argc, char** argv) {
  // Guard against an exec loop if something clears the variables again.
  if (std::getenv("DRAFTLAB_REEXECED") != nullptr) return;
  bool changed = false;
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && cpu_has_avx512f()) {
    ::setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    changed = true;
  }
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && asks_for_threads(argc, argv)) {
    ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    changed = true;
  }
  if (!changed) return;
  ::setenv("DRAFTLAB_REEXECED", "1", 1);
  ::execv("/proc/self/exe", argv);
  // execv only returns on failure: carry on with what the libraries picked.
}

std::string blas_description() {
  using StrFn = char* (*)();
  auto config = reinterpret_cast<StrFn>(::dlsym(RTLD_DEFAULT, "openblas_get_config"));
  auto core = reinterpret_cast<StrFn>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  std::string out;
  if (config) out = config();
  if (core) out += std::string(out.empty() ? "" : " ") + "core=" + core();
  if (out.empty()) out = "unknown (not OpenBLAS)";
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  out += std::string(" OPENBLAS_CORETYPE=") + (env ? env : "(unset)");
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  out += std::string(" OMP_WAIT_POLICY=") + (wait ? wait : "(unset)");
  const std::string warning = blas_coretype_warning();
  if (!warning.empty()) out += " [WARNING: " + warning + "]";
  return out;
}

std::string blas_coretype_warning() {
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  if (env == nullptr || !cpu_has_avx512f()) return "";
  std::string core = env;
  for (char& ch : core) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  // OpenBLAS 0.3.21's x86-64 cores with AVX-512 kernels.
  for (const char* ok : {"skylakex", "cooperlake", "sapphirerapids"})
    if (core == ok) return "";
  return std::string("OPENBLAS_CORETYPE=") + env +
         " is preset on a CPU with AVX-512: OpenBLAS runs that core's kernels, not its AVX-512 ones (libtorch "
         "reference path GEMMs slower); unset it or set SkylakeX";
}

void keep_freed_memory_for_training() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT32_MAX);
  mallopt(M_TOP_PAD, 256 << 20);
#endif
}

void return_free_memory_to_os() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

static int64_t proc_status_kb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, key.size(), key) == 0 && line.size() > key.size() && line[key.size()] == ':')
      return std::atoll(line.c_str() + key.size() + 1);
  return 0;
}

int64_t resident_memory_bytes() { return proc_status_kb("VmRSS") * 1024; }
int64_t peak_resident_memory_bytes() { return proc_status_kb("VmHWM") * 1024; }

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(line.find_first_not_of(" \t", pos + 1));
    }
  }
  return "unknown";
}

}  // namespace draftlab
