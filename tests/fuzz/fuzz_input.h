// What every fuzz target shares: the input as a file (most parsers take a path) and the one outcome bad input may
// have. Anything else - a crash, an ASan/UBSan report, a leak, a timeout, an exception of another type - reaches
// libFuzzer as a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include "core/base/error.h"

namespace draftlab::fuzz {

// A scratch folder of this process, removed at exit: the per-run input is a file under it, rewritten each run, with
// a name some loaders look at (extension, folder layout). Under $DRAFTLAB_FUZZ_SCRATCH when set (scripts/fuzz.sh
// sets it, and removes it: a crash skips the exit handler), else /dev/shm when there is one (no disk writes).
inline const std::string& scratch_dir() {
  // Never destroyed: the exit handler below runs after static destructors would have.
  static const std::string* dir = [] {
    const char* scratch = std::getenv("DRAFTLAB_FUZZ_SCRATCH");
    const char* base = scratch && *scratch ? scratch : access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    auto* d = new std::string(std::string(base) + "/draftlab-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(*d);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_dir(), ignored);
    });
    return d;
  }();
  return *dir;
}

// Writes the input to scratch_dir()/name and returns the path.
inline std::string input_file(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = scratch_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();  // the harness, not the parser, failed: stop rather than fuzz nothing
  }
  return path;
}

// Runs parse(). draftlab::Error is how a parser rejects bad input. Other std::exceptions (a library's own, such as
// nlohmann's) are accepted too, unless DRAFTLAB_FUZZ_STRICT=1: then they abort, since the project's errors
// should name the file and field (docs/testing.md, "Fuzzing").
// DRAFTLAB_FUZZ_VERBOSE=1 prints each rejection (to see why a seed does not parse).
inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && std::string(v) == "1";
}

template <class Parse>
int expect_clean_failure(Parse&& parse) {
  static const bool strict = env_flag("DRAFTLAB_FUZZ_STRICT"), verbose = env_flag("DRAFTLAB_FUZZ_VERBOSE");
  try {
    parse();
  } catch (const Error& e) {
    if (verbose) std::fprintf(stderr, "rejected: %s\n", e.what());
  } catch (const std::exception& e) {
    if (verbose || strict) std::fprintf(stderr, "rejected, not by a draftlab::Error: %s\n", e.what());
    if (strict) std::abort();
  }
  return 0;
}

// Reads every byte of [data, data + n): a parser that let a tensor reach past its file is caught by ASan here.
inline void touch(const uint8_t* data, size_t n) {
  static volatile uint8_t sink;  // keeps the reads from being optimised away
  uint8_t x = 0;
  for (size_t i = 0; i < n; ++i) x ^= data[i];
  sink = x;
}

}  // namespace draftlab::fuzz
