// The values both GGUF "every type" fixtures carry (tests/io/test_gguf.cpp builds its file by hand,
// tests/io/test_gguf_writer.cpp with GgufWriter): one check that a reader sees each of them with its type.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/io/gguf.h"

namespace draftlab::testing {

inline void expect_every_scalar_type(const GgufFile& f) {
  EXPECT_EQ(f.get_int("u8"), 200);
  EXPECT_EQ(f.get_int("i8"), -100);
  EXPECT_EQ(f.get_int("u16"), 60000);
  EXPECT_EQ(f.get_int("i16"), -30000);
  EXPECT_EQ(f.get_int("u32"), 4000000000ll);
  EXPECT_EQ(f.get_int("i32"), -2000000000);
  EXPECT_EQ(f.get_int("u64"), 1ll << 40);
  EXPECT_EQ(f.get_int("i64"), -(1ll << 40));
  EXPECT_EQ(std::get<double>(f.metadata.at("f32").v), 1.5);
  EXPECT_EQ(std::get<double>(f.metadata.at("f64").v), 0.25);
  EXPECT_EQ(std::get<bool>(f.metadata.at("bool").v), true);
  EXPECT_EQ(f.get_string("str"), "h\xC3\xA9llo");
  EXPECT_EQ(f.get_int_array("ints"), (std::vector<int64_t>{7, -8, 9}));
}

}  // namespace draftlab::testing
