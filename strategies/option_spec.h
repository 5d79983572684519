// OptionSpec - one row of an option table: a key, its type, default, range and help. Strategies declare theirs
// (strategy_descriptor.h: -s NAME:key=value), head families their training flags (head_family.h: train-head
// --kind NAME --key value); both are checked against the table before any model loads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace draftlab {

enum class OptionType { Integer, Number, Boolean, Text, Path, Choice };

// One row of a strategy's option table.
struct OptionSpec {
  std::string key;
  OptionType type = OptionType::Text;
  std::string default_value;         // "" = none: absent unless given (reads as "")
  std::string help;
  std::optional<double> min, max;    // Integer, Number
  std::vector<std::string> choices;  // Choice; for an Integer, words accepted besides numbers ("auto")
  bool required = false;

  OptionSpec& also(const std::string& word) {  // integer("total_tokens", ...).also("auto")
    choices.push_back(word);
    return *this;
  }
  // "1..1024", "value|confidence", "true|false", "PATH": what the value may be.
  std::string range() const;
  // Whether `value` is one this option takes (its type and range, or one of its words).
  bool accepts(const std::string& value) const;
  // Throws Error "strategy NAME: option KEY: expected RANGE, got 'VALUE'".
  void check(const std::string& strategy, const std::string& value) const;
};

OptionSpec integer_option(const std::string& key, int64_t default_value, int64_t min, int64_t max, const std::string& help);
OptionSpec number_option(const std::string& key, double default_value, double min, double max, const std::string& help);
OptionSpec bool_option(const std::string& key, bool default_value, const std::string& help);
OptionSpec choice_option(const std::string& key, const std::vector<std::string>& choices, const std::string& help);
OptionSpec text_option(const std::string& key, const std::string& default_value, const std::string& help);
OptionSpec path_option(const std::string& key, bool required, const std::string& help);

}  // namespace draftlab
