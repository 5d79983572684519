#include "strategies/strategy_options.h"

#include <cmath>
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

bool parse_option_int(const std::string& text, int64_t* out) {
  char* end = nullptr;
  const long long x = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') return false;
  *out = x;
  return true;
}

bool parse_option_number(const std::string& text, double* out) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(x)) return false;
  *out = x;
  return true;
}

bool parse_option_number_pair(const std::string& text, double* a, double* b) {
  const auto comma = text.find(',');
  return comma != std::string::npos && parse_option_number(text.substr(0, comma), a) &&
         parse_option_number(text.substr(comma + 1), b);
}

bool parse_option_bool(const std::string& text, bool* out) {
  if (text == "1" || text == "true" || text == "yes" || text == "on") return *out = true, true;
  if (text == "0" || text == "false" || text == "no" || text == "off") return *out = false, true;
  return false;
}

int64_t StrategyOptions::get_int(const std::string& key) const {
  const std::string& v = raw(key);
  int64_t x = 0;
  if (!parse_option_int(v, &x)) throw Error("option " + key + ": expected an integer, got '" + v + "'");
  return x;
}

double StrategyOptions::get_double(const std::string& key) const {
  const std::string& v = raw(key);
  double x = 0;
  if (!parse_option_number(v, &x)) throw Error("option " + key + ": expected a number, got '" + v + "'");
  return x;
}

bool StrategyOptions::get_bool(const std::string& key) const {
  const std::string& v = raw(key);
  bool x = false;
  if (!parse_option_bool(v, &x)) throw Error("option " + key + ": expected true or false, got '" + v + "'");
  return x;
}

std::string StrategyOptions::get_string(const std::string& key) const { return raw(key); }

std::string StrategyOptions::to_string() const {
  std::string s;
  for (const auto& [k, v] : values_) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

}  // namespace draftlab
