// torch.save() archives read without libtorch (core/io/torch_archive.h): the inputs the fuzzer's harness showed to
// break the reader (tests/fuzz/regressions/torch_archive, each described in tests/fuzz/regressions/README.md) must
// fail with an Error naming the file and what is wrong; under AddressSanitizer (draftlab_asan_tests) also without
// an out-of-bounds read, an overflow or a leak. Valid archives are read in tests/model/test_torch_checkpoint.cpp.
#include <gtest/gtest.h>

#include "core/io/torch_archive.h"
#include "test_errors.h"
#include "test_paths.h"

namespace draftlab {
namespace {

void expect_refused(const std::string& name, const std::string& why) {
  const std::string path = testing::source_path("tests/fuzz/regressions/torch_archive/" + name);
  ASSERT_TRUE(testing::exists(path)) << path;
  testing::expect_error([&] { read_torch_archive(path); }, {path, why});
}

TEST(TorchArchive, StorageWhoseByteCountOverflows) {
  // numel 2^62 float32 over 0 bytes: numel * 4 wrapped to 0 and matched the empty storage.
  expect_refused("numel_overflow", "storage 0: 0 bytes for 4611686018427387904 elements");
}

TEST(TorchArchive, ViewWhoseLastElementOverflows) {
  // sizes [2, 2], strides [2^62, 2^62]: offset + sum((size - 1) * stride) wrapped past int64.
  expect_refused("stride_overflow", "view past the end of its storage");
}

TEST(TorchArchive, StringLengthWrappingTheReadPosition) {
  // BINUNICODE8 of length 2^64 - 9: i + length wrapped the bounds check and sent the reader back to the same
  // opcode, forever.
  expect_refused("binunicode8_loop", "data.pkl truncated");
}

TEST(TorchArchive, Zip64OffsetsNearTwoToThe64) {
  // Each offset plus a record size wrapped below the file size, and the record was read before the buffer.
  expect_refused("zip64_record_wraps", "zip archive: bad zip64 end-of-central-directory record");
  expect_refused("zip64_cd_wraps", "zip archive: bad central directory entry");
  expect_refused("zip64_local_wraps", "zip archive: bad local header of 'archive/data.pkl'");
}

TEST(TorchArchive, Zip64ExtraFieldTooShort) {
  // The offset was read from beyond the extra field (past the end of the file when the field ends it).
  expect_refused("zip64_extra_short", "zip64 extra field of 'archive/data.pkl' shorter than the sizes it replaces");
}

TEST(TorchArchive, ListAppendedToItself) {
  // A reference cycle of shared_ptrs: leaked (LeakSanitizer) until the unpickler emptied what it made.
  expect_refused("self_append", "expected a state dict (str -> tensor) at the top");
}

}  // namespace
}  // namespace draftlab
