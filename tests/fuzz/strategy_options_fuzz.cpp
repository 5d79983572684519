// Strategy option strings (strategies/strategy_options.h, option_spec.h): the "key=value,key=value" text of
// `-s NAME:...` split as the command line does, parsed, checked against option tables of every type, and read back
// typed where a table accepts the value (the numbers' parsers: overflow, NaN, out-of-range casts).
#include <string>
#include <vector>

#include "strategies/option_spec.h"
#include "strategies/strategy_options.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  static const std::vector<OptionSpec> table = {
      integer_option("total_tokens", 60, 1, 1024, "").also("auto"), integer_option("depth", 6, 1, 64, ""),
      number_option("threshold", 0.5, 0, 1, ""),                   number_option("decay", 0.8, 1e-9, 1e9, ""),
      bool_option("rerank", true, ""),                               choice_option("rank_by", {"value", "confidence"}, ""),
      text_option("tree", "mc_sim_7b_63", ""),                       path_option("head", false, "")};
  return fuzz::expect_clean_failure([&] {
    const std::string text(reinterpret_cast<const char*>(data), size);
    std::vector<std::string> items;
    for (size_t start = 0;;) {
      const size_t comma = text.find(',', start);
      items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    StrategyOptions options = StrategyOptions::parse(items);
    for (const OptionSpec& spec : table) options.set_default(spec.key, spec.default_value);
    for (const auto& [key, value] : options.values()) {
      for (const OptionSpec& spec : table) {
        if (!spec.accepts(value)) {
          try {
            spec.check("fuzz", value);
            std::abort();  // accepts() said no, check() must throw
          } catch (const Error&) {
          }
          continue;
        }
        spec.check("fuzz", value);
        if (spec.key != key) continue;
        switch (spec.type) {
          case OptionType::Integer:
            if (spec.choices.empty() || value != "auto") {
              const int64_t v = options.get_int(key);
              if (v < *spec.min || v > *spec.max) std::abort();  // accepted, so within the range
            }
            break;
          case OptionType::Number: {
            const double v = options.get_double(key);
            if (!(v >= *spec.min && v <= *spec.max)) std::abort();
            break;
          }
          case OptionType::Boolean: options.get_bool(key); break;
          default: options.get_string(key); break;
        }
      }
    }
    options.to_string();
  });
}
