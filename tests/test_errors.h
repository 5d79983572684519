// expect_error: the call must throw draftlab::Error whose message contains every one of `needles`
// (error messages are part of the interface: they name the file, the field and the expected value).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/base/error.h"

namespace draftlab::testing {

template <class F>
void expect_error(F f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no draftlab::Error thrown; expected one mentioning '" << (needles.empty() ? "" : needles[0]) << "'";
  } catch (const ::draftlab::Error& e) {
    const std::string message = e.what();
    for (const std::string& n : needles)
      EXPECT_NE(message.find(n), std::string::npos) << "'" << n << "' not in: " << message;
  }
}

}  // namespace draftlab::testing
