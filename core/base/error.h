// draftlab::Error - the one exception type for bad input.
//
// Every message names where the problem is (file, field) and what was expected,
// so a researcher can fix the input without reading the source:
//   throw Error::in_file(path, "num_key_value_heads", "a divisor of num_attention_heads (32)", "5");
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace draftlab {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}

  // "<file>: <field>: expected <expected>, got <got>"
  static Error in_file(const std::string& file, const std::string& field, const std::string& expected,
                       const std::string& got) {
    return Error(file + ": " + field + ": expected " + expected + ", got " + got);
  }
  // "<file>: <what>"
  static Error at(const std::string& file, const std::string& what) { return Error(file + ": " + what); }
};

// Throws Error(message) when cond is false. For input validation, not for internal invariants.
inline void check(bool cond, const std::string& message) {
  if (!cond) throw Error(message);
}
// A literal message: no std::string is built when the check passes.
inline void check(bool cond, const char* message) {
  if (!cond) throw Error(message);
}
// A message built by make() only when the check fails: for checks on per-token paths, where concatenating the
// message every time would cost more than the work it guards.
template <class MakeMessage, class = decltype(std::string(std::declval<MakeMessage&>()()))>
inline void check(bool cond, MakeMessage&& make) {
  if (!cond) throw Error(make());
}

}  // namespace draftlab
