// SHA-256 (FIPS 180-4), for the checksums of model weights recorded next to experiment results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace draftlab {

// Incremental hasher: update() any number of times, then hex_digest() once.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  std::string hex_digest();  // 64 lowercase hex digits; finalizes the hasher

 private:
  void compress(const uint8_t block[64]);
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(const std::string& bytes);

// The SHA-256 of a whole file, read in chunks. Throws Error naming the path when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace draftlab
