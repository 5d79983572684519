#include "core/base/file_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/base/error.h"

namespace draftlab {

FileBytes::FileBytes(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error::at(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error::at(path, "not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
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
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void forget_mapped_pages(const uint8_t* data, size_t n) {
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

void write_file_atomically(const std::string& path, const std::string& bytes) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error::at(path, "cannot create temporary file " + tmp);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      throw Error::at(path, "write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error::at(path, std::string("cannot rename temporary file: ") + std::strerror(errno));
  }
}

TemporaryFile::TemporaryFile(const std::string& target)
    : target_(target), tmp_(target + ".tmp." + std::to_string(::getpid())) {
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
  const bool flushed = std::fflush(file_) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) throw Error::at(target_, "write to " + tmp_ + " failed: " + std::strerror(errno));
  if (std::rename(tmp_.c_str(), target_.c_str()) != 0)
    throw Error::at(target_, std::string("cannot rename temporary file: ") + std::strerror(errno));
  committed_ = true;
}

}  // namespace draftlab
