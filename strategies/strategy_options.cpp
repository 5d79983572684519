#include "strategies/strategy_options.h"

#include <cstdlib>

#include "core/base/error.h"

namespace draftlab {

StrategyOptions StrategyOptions::parse(const std::vector<std::string>& items) {
  StrategyOptions o;
  for (const auto& item : items) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw Error("strategy option '" + item + "': expected key=value");
    o.set(item.substr(0, eq), item.substr(eq + 1));
  }
  return o;
}

const std::string& StrategyOptions::raw(const std::string& key) const {
  auto it = values_.find(key);
  if (it != values_.end()) return it->second;
  auto d = defaults_.find(key);
  if (d == defaults_.end())
    throw Error("option " + key + ": read by the strategy but not declared in its option table");
  return d->second;
}

int64_t StrategyOptions::get_int(const std::string& key) const {
  const std::string& v = raw(key);
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') throw Error("option " + key + ": expected an integer, got '" + v + "'");
  return x;
}

double StrategyOptions::get_double(const std::string& key) const {
  const std::string& v = raw(key);
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') throw Error("option " + key + ": expected a number, got '" + v + "'");
  return x;
}

bool StrategyOptions::get_bool(const std::string& key) const {
  const std::string& v = raw(key);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  throw Error("option " + key + ": expected true or false, got '" + v + "'");
}

std::string StrategyOptions::get_string(const std::string& key) const { return raw(key); }

std::string StrategyOptions::to_string() const {
  std::string s;
  for (const auto& [k, v] : values_) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

}  // namespace draftlab
