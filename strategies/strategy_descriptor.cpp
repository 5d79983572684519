#include "strategies/strategy_descriptor.h"

#include <sstream>

#include "core/base/error.h"

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
      std::string r = (min ? number_text(*min) : "") + ".." + (max ? number_text(*max) : "");
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

void OptionSpec::check(const std::string& strategy, const std::string& value) const {
  for (const auto& c : choices)
    if (value == c) return;
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
  if (!ok)
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

const OptionSpec* StrategyDescriptor::option(const std::string& key) const {
  for (const auto& o : options)
    if (o.key == key) return &o;
  return nullptr;
}

const char* needs_name(StrategyNeeds needs) {
  switch (needs) {
    case StrategyNeeds::Nothing: return "nothing";
    case StrategyNeeds::Head: return "EAGLE head";
    case StrategyNeeds::DraftModel: return "draft model";
  }
  return "?";
}

std::string needs_label(const StrategyDescriptor& strategy) {
  return strategy.needs == StrategyNeeds::Head ? find_head_family(strategy.head_family).title : needs_name(strategy.needs);
}

const char* shape_name(DraftShape shape) {
  switch (shape) {
    case DraftShape::None: return "none";
    case DraftShape::Chain: return "chain";
    case DraftShape::StaticTree: return "static_tree";
    case DraftShape::DynamicTree: return "dynamic_tree";
  }
  return "?";
}

const char* needs_option(StrategyNeeds needs) {
  switch (needs) {
    case StrategyNeeds::Nothing: return "";
    case StrategyNeeds::Head: return "head";
    case StrategyNeeds::DraftModel: return "draft";
  }
  return "";
}

}  // namespace draftlab
