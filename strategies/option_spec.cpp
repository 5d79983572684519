#include "strategies/option_spec.h"

#include <sstream>

#include "core/base/error.h"
#include "strategies/strategy_options.h"

namespace draftlab {

namespace {

std::string number_text(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

}  // namespace

std::string OptionSpec::range() const {
  std::string words;
  for (const auto& c : choices) words += (words.empty() ? "" : "|") + c;
  switch (type) {
    case OptionType::Integer:
    case OptionType::Number: {
      auto bound = [&](double x) {  // integers in full: 100000000, not 1e+08
        return type == OptionType::Integer ? std::to_string(static_cast<int64_t>(x)) : number_text(x);
      };
      std::string r = (min ? bound(*min) : "") + ".." + (max ? bound(*max) : "");
      if (type == OptionType::Number) r += " (number)";
      return words.empty() ? r : r + "|" + words;
    }
    case OptionType::Boolean: return "true|false";
    case OptionType::Choice: return words;
    case OptionType::Path: return "PATH";
    case OptionType::Text: return "TEXT";
  }
  return "";
}

bool OptionSpec::accepts(const std::string& value) const {
  for (const auto& c : choices)
    if (value == c) return true;
  auto in_range = [&](double x) { return (!min || x >= *min) && (!max || x <= *max); };
  bool ok = true;
  int64_t i = 0;
  double x = 0;
  bool b = false;
  switch (type) {
    case OptionType::Integer: ok = parse_option_int(value, &i) && in_range(static_cast<double>(i)); break;
    case OptionType::Number: ok = parse_option_number(value, &x) && in_range(x); break;
    case OptionType::Boolean: ok = parse_option_bool(value, &b); break;
    case OptionType::Choice: ok = false; break;  // matched above or not at all
    case OptionType::Path:
    case OptionType::Text: ok = !value.empty(); break;
  }
  return ok;
}

void OptionSpec::check(const std::string& strategy, const std::string& value) const {
  if (!accepts(value))
    throw Error("strategy " + strategy + ": option " + key + ": expected " + range() + ", got '" + value + "'");
}

OptionSpec integer_option(const std::string& key, int64_t default_value, int64_t min, int64_t max,
                          const std::string& help) {
  OptionSpec o{key, OptionType::Integer, std::to_string(default_value), help};
  o.min = static_cast<double>(min);
  o.max = static_cast<double>(max);
  return o;
}

OptionSpec number_option(const std::string& key, double default_value, double min, double max, const std::string& help) {
  OptionSpec o{key, OptionType::Number, number_text(default_value), help};
  o.min = min;
  o.max = max;
  return o;
}

OptionSpec bool_option(const std::string& key, bool default_value, const std::string& help) {
  return OptionSpec{key, OptionType::Boolean, default_value ? "true" : "false", help};
}

OptionSpec choice_option(const std::string& key, const std::vector<std::string>& choices, const std::string& help) {
  OptionSpec o{key, OptionType::Choice, choices.at(0), help};
  o.choices = choices;
  return o;
}

OptionSpec text_option(const std::string& key, const std::string& default_value, const std::string& help) {
  return OptionSpec{key, OptionType::Text, default_value, help};
}

OptionSpec path_option(const std::string& key, bool required, const std::string& help) {
  OptionSpec o{key, OptionType::Path, "", help};
  o.required = required;
  return o;
}

}  // namespace draftlab
