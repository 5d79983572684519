#include "strategies/registry.h"

#include <algorithm>

#include "core/base/error.h"

namespace draftlab {

const std::vector<const DraftFamily*>& draft_family_table() {
#define DRAFTLAB_LIST_FAMILY(name) &name##_family(),
  static const std::vector<const DraftFamily*> table{DRAFTLAB_FAMILIES(DRAFTLAB_LIST_FAMILY)};
#undef DRAFTLAB_LIST_FAMILY
  return table;
}

const std::vector<const StrategyDescriptor*>& strategy_table() {
  static const std::vector<const StrategyDescriptor*> table = [] {
    std::vector<const StrategyDescriptor*> t;
    for (const DraftFamily* f : draft_family_table()) t.insert(t.end(), f->strategies.begin(), f->strategies.end());
    return t;
  }();
  return table;
}

namespace {

std::vector<std::unique_ptr<StrategyDescriptor>>& runtime_strategies() {
  static std::vector<std::unique_ptr<StrategyDescriptor>> table;
  return table;
}

// The built-in strategy or registered one of that name, or nullptr.
const StrategyDescriptor* lookup_strategy(const std::string& name) {
  for (const StrategyDescriptor* s : strategy_table())
    if (s->name == name) return s;
  for (const auto& s : runtime_strategies())
    if (s->name == name) return s.get();
  return nullptr;
}

}  // namespace

const StrategyDescriptor& find_strategy(const std::string& name) {
  if (const StrategyDescriptor* s = lookup_strategy(name)) return *s;
  std::string known;
  for (const StrategyDescriptor* s : strategy_table()) known += (known.empty() ? "" : ", ") + s->name;
  for (const auto& s : runtime_strategies()) known += ", " + s->name;
  throw Error("--strategy: expected one of " + known + ", got '" + name + "'");
}

void register_strategy(StrategyDescriptor descriptor) {
  check(!descriptor.name.empty() && descriptor.name.find_first_of(":,= ") == std::string::npos,
        "register_strategy: expected a name without ':', ',', '=' or spaces, got '" + descriptor.name + "'");
  check(descriptor.shape != DraftShape::None && descriptor.make,
        "register_strategy: strategy " + descriptor.name + " needs a draft shape other than none and a factory");
  check(lookup_strategy(descriptor.name) == nullptr, "register_strategy: the name '" + descriptor.name + "' is taken");
  runtime_strategies().push_back(std::make_unique<StrategyDescriptor>(std::move(descriptor)));
}

void unregister_strategy(const std::string& name) {
  auto& t = runtime_strategies();
  t.erase(std::remove_if(t.begin(), t.end(), [&](const auto& s) { return s->name == name; }), t.end());
}

const StrategyDescriptor& baseline_strategy() {
  for (const StrategyDescriptor* s : strategy_table())
    if (s->shape == DraftShape::None) return *s;
  throw Error("registry: no strategy without drafts (the baseline)");
}

StrategyOptions resolve_options(const StrategyDescriptor& strategy, const StrategyOptions& given) {
  StrategyOptions out = given;
  for (const auto& [key, value] : given.values()) {
    const OptionSpec* spec = strategy.option(key);
    if (!spec) {
      std::string keys;
      for (const auto& o : strategy.options)
        keys += (keys.empty() ? "" : ", ") + o.key + "=" + (o.default_value.empty() ? o.range() : o.default_value);
      throw Error("strategy " + strategy.name + ": unknown option '" + key + "' (options: " +
                  (keys.empty() ? "none" : keys) + ")");
    }
    spec->check(strategy.name, value);
  }
  for (const auto& o : strategy.options) {
    if (o.required && !given.given(o.key))
      throw Error("strategy " + strategy.name + ": option " + o.key + " is required: " + o.key + "=" + o.range() +
                  " (" + o.help + ")");
    out.set_default(o.key, o.default_value);
  }
  if (strategy.check_options) strategy.check_options(out);
  if (strategy.needs == StrategyNeeds::Head && !strategy.head_family.empty() && given.given("head"))
    check_head_path(find_head_family(strategy.head_family), out.get_string("head"));
  return out;
}

std::unique_ptr<DraftStrategy> make_strategy(const std::string& name, const StrategyContext& context,
                                             const StrategyOptions& options) {
  const StrategyDescriptor& s = find_strategy(name);
  return s.make(context, resolve_options(s, options));
}

StrategySpec parse_strategy_spec(const std::string& text, const std::string& flag) {
  StrategySpec spec;
  const auto colon = text.find(':');
  spec.name = text.substr(0, colon);
  check(!spec.name.empty(), flag + ": expected NAME or NAME:key=value,..., got '" + text + "'");
  if (colon == std::string::npos) return spec;
  const std::string rest = text.substr(colon + 1);
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t comma = rest.find(',', pos);
    if (comma == std::string::npos) comma = rest.size();
    const std::string item = rest.substr(pos, comma - pos);
    if (!item.empty()) {
      const auto eq = item.find('=');
      check(eq != std::string::npos && eq > 0, flag + " " + text + ": expected key=value items, got '" + item + "'");
      spec.options.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    }
    pos = comma + 1;
  }
  return spec;
}

namespace {

std::string option_with_default(const OptionSpec& o) {
  if (o.required) return o.key + "=" + o.range() + " (required)";
  return o.key + "=" + (o.default_value.empty() ? o.range() : o.default_value);
}

}  // namespace

std::string strategies_help() {
  std::string s;
  for (const StrategyDescriptor* d : strategy_table()) {
    s += "  " + d->name + ": " + d->summary + "\n";
    for (const auto& o : d->options) {
      std::string line = "      " + o.key + " = " + o.range();
      if (o.required)
        line += ", required";
      else if (!o.default_value.empty())
        line += ", default " + o.default_value;
      s += line + ": " + o.help + "\n";
    }
  }
  return s;
}

std::string strategies_markdown() {
  std::string s = "| strategy | needs | drafts | options (defaults) | what it does |\n|---|---|---|---|---|\n";
  for (const StrategyDescriptor* d : strategy_table()) {
    std::string options;
    for (const auto& o : d->options) options += (options.empty() ? "" : " ") + ("`" + option_with_default(o) + "`");
    std::string shape = shape_name(d->shape);
    for (char& c : shape)
      if (c == '_') c = ' ';
    s += "| `" + d->name + "` | " + needs_label(*d) + " | " + shape + " | " + (options.empty() ? "-" : options) +
         " | " + d->summary + " |\n";
  }
  return s;
}

}  // namespace draftlab
