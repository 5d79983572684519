// Read-only view of a whole file, memory-mapped when possible.
// Checkpoints and vocabularies are parsed in place; nothing is copied until a tensor is built.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace draftlab {

class FileBytes {
 public:
  // Throws Error naming the path if the file cannot be opened or mapped.
  explicit FileBytes(const std::string& path);
  ~FileBytes();
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Tells the kernel that the pages of [data, data + n) inside a FileBytes mapping are not needed now: they leave
// the process's resident memory and are read again from the page cache if touched. (The mapping is read-only and
// private, so no page holds anything the file does not.) Loaders call it once a tensor is copied out, so a
// checkpoint's pages do not add to the peak memory of a load.
void forget_mapped_pages(const uint8_t* data, size_t n);

// Whole file as a string (small text files: config.json, tokenizer.json). Throws Error naming the path.
std::string read_text_file(const std::string& path);

// True if path exists and is a regular file / directory.
bool is_file(const std::string& path);
bool is_directory(const std::string& path);

// Every atomic write below goes through a temporary file beside its target, PATH.tmp.PID, flushed to disk (fsync)
// before the rename, so the name never points at an empty or partial file, even after a power loss. A process
// killed mid-write leaves its PATH.tmp.PID behind; the next write of PATH removes those whose process is gone.

// Writes `bytes` to `path` atomically.
// A failed or interrupted write never leaves a partial file at `path`.
void write_file_atomically(const std::string& path, const std::string& bytes);

// The atomic write for files another library creates by name (HDF5): write(tmp) creates the file at the temporary
// path it is given and closes it; then it is flushed to disk and renamed to `path`. What dead writers of `path` left
// is removed first; on any exception the temporary is removed and the exception passes on. Errors name `path`.
void write_through_temporary(const std::string& path, const std::function<void(const std::string& tmp)>& write);

// The streaming form of write_file_atomically: writes go to a temporary file beside `target`, which commit()
// flushes to disk and renames into place and the destructor removes if commit() was never reached (an exception
// on the way). Checkpoints can be gigabytes, so nothing is assembled in memory. Errors name `target`.
class TemporaryFile {
 public:
  explicit TemporaryFile(const std::string& target);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  void write(const void* data, size_t n);
  void commit();

 private:
  std::string target_;
  std::string tmp_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
};

}  // namespace draftlab
