#include "core/base/file_bytes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>
#include <vector>

#include "core/base/error.h"

// Under AddressSanitizer (draftlab_asan_tests, tests/fuzz) the file is read into a heap buffer of exactly its size
// instead of mapped: a parser reading past the end of a mapping reads the zeros of its last page unnoticed, past a
// heap buffer ASan stops it.
#if defined(__SANITIZE_ADDRESS__)
#define DRAFTLAB_FILE_BYTES_ON_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DRAFTLAB_FILE_BYTES_ON_HEAP 1
#endif
#endif
#ifndef DRAFTLAB_FILE_BYTES_ON_HEAP
#define DRAFTLAB_FILE_BYTES_ON_HEAP 0
#endif

namespace draftlab {

namespace {

constexpr std::align_val_t kHeapAlignment{64};  // tensors' offsets assume an aligned base, as a mapping's is

// The whole file into a heap buffer (DRAFTLAB_FILE_BYTES_ON_HEAP).
const uint8_t* read_to_heap(int fd, size_t size, const std::string& path) {
  auto* buffer = static_cast<uint8_t*>(::operator new(size, kHeapAlignment));
  for (size_t done = 0; done < size;) {
    const ssize_t got = ::pread(fd, buffer + done, size - done, static_cast<off_t>(done));
    if (got <= 0) {
      ::operator delete(buffer, kHeapAlignment);
      throw Error::at(path, std::string("cannot read: ") + (got < 0 ? std::strerror(errno) : "file shrank"));
    }
    done += static_cast<size_t>(got);
  }
  return buffer;
}

}  // namespace

FileBytes::FileBytes(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error::at(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error::at(path, "not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0 && DRAFTLAB_FILE_BYTES_ON_HEAP) {
    try {
      data_ = read_to_heap(fd, size_, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
  } else if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw Error::at(path, std::string("cannot mmap: ") + std::strerror(errno));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

FileBytes::~FileBytes() {
  if (data_ && DRAFTLAB_FILE_BYTES_ON_HEAP) ::operator delete(const_cast<uint8_t*>(data_), kHeapAlignment);
  else if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void forget_mapped_pages(const uint8_t* data, size_t n) {
  if (DRAFTLAB_FILE_BYTES_ON_HEAP) return;  // not a mapping: the advice would drop other objects' pages
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + n;
  if (n > 0) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);  // advice: errors are harmless
}

std::string read_text_file(const std::string& path) {
  if (!is_file(path)) throw Error::at(path, "file not found");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error::at(path, "cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

namespace {

std::string temporary_path(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

void remove_stale_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string prefix = target.filename().string() + ".tmp.";
  std::vector<fs::path> stale;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    // A running process (or one not ours to signal) may be writing it now: only a vanished writer's file goes.
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    stale.push_back(it->path());
  }
  for (const fs::path& p : stale) fs::remove(p, ec);  // best effort: a leftover never fails the write
}

void sync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error::at(path, std::string("cannot open to flush to disk: ") + std::strerror(errno));
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!synced) throw Error::at(path, std::string("cannot flush to disk: ") + std::strerror(err));
}

}  // namespace

void write_through_temporary(const std::string& path, const std::function<void(const std::string& tmp)>& write) {
  const std::string tmp = temporary_path(path);
  remove_stale_temporaries(path);  // what a writer killed while writing this file left
  try {
    write(tmp);
    sync_file(tmp);  // on disk before the rename: the name never points at a partial file, even after a power loss
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error::at(path, "cannot rename the temporary file " + tmp + " into place: " + why);
  }
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  TemporaryFile out(path);
  out.write(bytes.data(), bytes.size());
  out.commit();
}

TemporaryFile::TemporaryFile(const std::string& target) : target_(target), tmp_(temporary_path(target)) {
  remove_stale_temporaries(target_);
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (!file_) throw Error::at(target_, "cannot create temporary file " + tmp_ + ": " + std::strerror(errno));
}

TemporaryFile::~TemporaryFile() {
  if (file_) std::fclose(file_);
  if (!committed_) std::remove(tmp_.c_str());
}

void TemporaryFile::write(const void* data, size_t n) {
  if (n > 0 && std::fwrite(data, 1, n, file_) != n)
    throw Error::at(target_, "write to " + tmp_ + " failed: " + std::strerror(errno));
}

void TemporaryFile::commit() {
  const bool flushed = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  const int err = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) throw Error::at(target_, "write to " + tmp_ + " failed: " + std::strerror(flushed ? errno : err));
  if (std::rename(tmp_.c_str(), target_.c_str()) != 0)
    throw Error::at(target_, std::string("cannot rename temporary file: ") + std::strerror(errno));
  committed_ = true;
}

}  // namespace draftlab
