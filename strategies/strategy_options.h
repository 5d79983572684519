// StrategyOptions - a strategy's settings as key=value strings (from `-s NAME:key=value,...` on the command line or
// an experiment's preset). make_strategy() checks them against the strategy's option table (strategy_descriptor.h)
// and fills in the defaults, so a factory reads every declared key with a typed getter and no fallback of its own.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace draftlab {

// The value syntax of every option, shared by the option table's checks and the typed getters: false when `text`
// is not an integer / a finite number / a boolean (1 true yes on, 0 false no off).
bool parse_option_int(const std::string& text, int64_t* out);
bool parse_option_number(const std::string& text, double* out);
bool parse_option_number_pair(const std::string& text, double* a, double* b);  // "a,b" (COD's r,r_min, ...)
bool parse_option_bool(const std::string& text, bool* out);

class StrategyOptions {
 public:
  StrategyOptions() = default;
  // Parses "key=value" items. Throws Error on an item without '='.
  static StrategyOptions parse(const std::vector<std::string>& items);

  void set(const std::string& key, const std::string& value) { values_[key] = value; }
  void set_default(const std::string& key, const std::string& value) { defaults_[key] = value; }
  // Whether the user gave the key (a default does not count).
  bool given(const std::string& key) const { return values_.count(key) != 0; }

  // Typed reads of a declared key (its value, else its default, else ""). Throw Error
  // "option <key>: expected <type>, got '<text>'"; reading an undeclared key is a programming error (Error too).
  int64_t get_int(const std::string& key) const;
  double get_double(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;

  const std::map<std::string, std::string>& values() const { return values_; }  // as given
  std::string to_string() const;  // "k1=v1 k2=v2" as given, for logs

 private:
  const std::string& raw(const std::string& key) const;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> defaults_;  // every declared key, "" where it has no default
};

}  // namespace draftlab
