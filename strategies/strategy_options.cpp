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

int64_t StrategyOptions::get_int(const std::string& key, int64_t fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  used_.insert(key);
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0') throw Error("option " + key + ": expected an integer, got '" + it->second + "'");
  return v;
}

double StrategyOptions::get_double(const std::string& key, double fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  used_.insert(key);
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0') throw Error("option " + key + ": expected a number, got '" + it->second + "'");
  return v;
}

bool StrategyOptions::get_bool(const std::string& key, bool fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  used_.insert(key);
  const std::string& v = it->second;
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  throw Error("option " + key + ": expected true or false, got '" + v + "'");
}

std::string StrategyOptions::get_string(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  used_.insert(key);
  return it->second;
}

std::vector<std::string> StrategyOptions::unused() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : values_)
    if (!used_.count(k)) out.push_back(k);
  return out;
}

std::string StrategyOptions::to_string() const {
  std::string s;
  for (const auto& [k, v] : values_) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

}  // namespace draftlab
