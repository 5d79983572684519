// Read-only view of a whole file, memory-mapped when possible.
// Checkpoints and vocabularies are parsed in place; nothing is copied until a tensor is built.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
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

// Writes `bytes` to `path` atomically: a temporary file beside it (PATH.tmp.PID), flushed to disk, then renamed.
// A failed or interrupted write never leaves a partial file at `path`.
void write_file_atomically(const std::string& path, const std::string& bytes);

// The temporary files of atomic writes. A process killed mid-write (SIGKILL, out of memory) leaves its
// PATH.tmp.PID behind: remove_stale_temporaries(PATH) removes those whose process is no longer running, and
// every atomic writer calls it before writing PATH, so the next write of a file clears what a killed one left.
// sync_file(PATH) flushes a closed file's data to disk (fsync), so that a rename after it never puts an empty or
// partial file under the final name after a power loss. Errors name the path.
std::string temporary_path(const std::string& path);
void remove_stale_temporaries(const std::string& path);
void sync_file(const std::string& path);

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
