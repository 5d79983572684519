// StrategyOptions - a strategy's settings as key=value strings (from `--opt key=value` on the command line or
// an experiment's config), read with typed getters that name the key in every error.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace draftlab {

class StrategyOptions {
 public:
  StrategyOptions() = default;
  // Parses "key=value" items. Throws Error on an item without '='.
  static StrategyOptions parse(const std::vector<std::string>& items);

  void set(const std::string& key, const std::string& value) { values_[key] = value; }
  bool has(const std::string& key) const { return values_.count(key) != 0; }

  // Typed reads; each marks the key as used. Throw Error "option <key>: expected <type>, got '<text>'".
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_double(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;

  // Keys set but never read (typos): make_strategy() rejects them, naming the strategy's valid keys.
  std::vector<std::string> unused() const;
  std::string to_string() const;  // "k1=v1 k2=v2", for logs and result files

 private:
  std::map<std::string, std::string> values_;
  mutable std::set<std::string> used_;
};

}  // namespace draftlab
