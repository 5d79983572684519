// Paths to the peer test vectors in ../shared, and a skip for when they are absent.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/stat.h>

namespace draftlab::testing {

// $DRAFTLAB_SHARED, else the ../shared beside the source tree.
inline std::string shared_dir() {
  const char* env = std::getenv("DRAFTLAB_SHARED");
  return env && *env ? std::string(env) : std::string(DRAFTLAB_SHARED_DEFAULT);
}
inline std::string shared_path(const std::string& rel) { return shared_dir() + "/" + rel; }
inline std::string source_path(const std::string& rel) { return std::string(DRAFTLAB_SOURCE_DIR) + "/" + rel; }
inline bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// A scratch directory unique to this test process, created on first use.
// Whether an atomic write of `path` left a temporary beside it (PATH.tmp.PID, core/base/file_bytes.h).
inline bool temporary_left(const std::string& path) {
  const std::filesystem::path target(path);
  const std::string prefix = target.filename().string() + ".tmp";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(target.parent_path(), ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(prefix, 0) == 0) return true;
  return false;
}

inline std::string temp_dir() {
  static std::string dir = [] {
    std::string d = "/tmp/draftlab-test-XXXXXX";
    if (!::mkdtemp(d.data())) std::abort();
    return d;
  }();
  return dir;
}

// temp_dir()/name, emptied (created if needed).
inline std::string fresh_dir(const std::string& name) {
  const std::string d = temp_dir() + "/" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace draftlab::testing

// Skips the test with a clear message when a file from ../shared is missing.
#define DRAFTLAB_REQUIRE_SHARED(rel)                                                                   \
  do {                                                                                                 \
    if (!::draftlab::testing::exists(::draftlab::testing::shared_path(rel)))                           \
      GTEST_SKIP() << "missing " << ::draftlab::testing::shared_path(rel) << " (set DRAFTLAB_SHARED)"; \
  } while (0)
