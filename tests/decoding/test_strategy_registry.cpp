// The registry's descriptors: consistent with themselves (unique names and test labels, defaults inside their own
// ranges, the options their needs imply) and enforced (unknown keys, types, ranges, required keys, defaults).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "strategies/head_family.h"
#include "strategies/registry.h"
#include "strategies/strategy_options.h"
#include "test_errors.h"

namespace draftlab {
namespace {

using testing::expect_error;

TEST(StrategyRegistry, DescriptorsAreConsistent) {
  std::set<std::string> names, labels;
  int baselines = 0;
  for (const StrategyDescriptor* d : strategy_table()) {
    SCOPED_TRACE(d->name);
    EXPECT_TRUE(names.insert(d->name).second) << "two strategies named " << d->name;
    EXPECT_FALSE(d->summary.empty());
    EXPECT_TRUE(d->make != nullptr);
    EXPECT_FALSE(d->test_variants.empty()) << "the lossless tests need at least one configuration";
    for (const auto& v : d->test_variants) EXPECT_TRUE(labels.insert(v.label).second) << "label " << v.label;
    baselines += d->shape == DraftShape::None;
    std::set<std::string> keys;
    for (const auto& o : d->options) {
      EXPECT_TRUE(keys.insert(o.key).second) << "option " << o.key << " twice";
      if (o.required)
        EXPECT_TRUE(o.default_value.empty()) << o.key << ": required with a default";
      else if (!o.default_value.empty())
        EXPECT_NO_THROW(o.check(d->name, o.default_value)) << o.key << ": the default is outside its own range";
    }
    const std::string needed = needs_option(d->needs);
    if (!needed.empty()) EXPECT_TRUE(keys.count(needed)) << "needs " << needs_name(d->needs) << " but has no " << needed;
  }
  EXPECT_EQ(baselines, 1) << "exactly one strategy drafts nothing: the baseline of every speedup";
  EXPECT_EQ(baseline_strategy().shape, DraftShape::None);
}

// T > 0 power for every drafting strategy: a variant may be exempt from the wrong-rule control (no_power, with a
// reason) or never rejected, but each strategy that drafts needs a variant in which a planted wrong acceptance rule is
// caught (tests/decoding/test_lossless_sampling.cpp runs that control on it).
TEST(StrategyRegistry, EveryDraftingStrategyHasAPoweredVariant) {
  for (const StrategyDescriptor* d : strategy_table()) {
    if (d->shape == DraftShape::None) continue;
    SCOPED_TRACE(d->name);
    int powered = 0;
    for (const TestVariant& v : d->test_variants) {
      EXPECT_FALSE(!v.no_power.empty() && !v.never_rejected.empty()) << v.label << ": exempt for two reasons";
      EXPECT_GE(v.control_temperature, 1.0) << v.label << ": a cooler control rejects less, not more";
      powered += v.no_power.empty() && v.never_rejected.empty();
    }
    EXPECT_GE(powered, 1) << "no variant of " << d->name << " has a wrong-rule control with power";
  }
}

// A family is one folder and one registry line: its descriptor must say everything the framework asks of it.
TEST(StrategyRegistry, FamiliesDeclareWhatTheFrameworkNeeds) {
  std::set<std::string> families, strategies;
  std::map<std::string, OptionType> flag_types;  // train-head flags shared by families must be alike
  for (const DraftFamily* f : draft_family_table()) {
    SCOPED_TRACE(f->name);
    EXPECT_TRUE(families.insert(f->name).second) << "two families named " << f->name;
    EXPECT_FALSE(f->strategies.empty()) << "a family drafts with at least one strategy";
    for (const StrategyDescriptor* s : f->strategies) {
      EXPECT_TRUE(strategies.insert(s->name).second) << s->name << " listed by two families";
      if (s->needs == StrategyNeeds::Head) {
        ASSERT_NE(f->heads, nullptr) << s->name << " needs heads its family does not declare";
        EXPECT_EQ(s->head_family, f->heads->name) << s->name << " loads heads of another family";
      }
    }
    if (!f->heads) continue;
    const HeadFamily& h = *f->heads;
    EXPECT_EQ(&find_head_family(h.name), &h);
    EXPECT_FALSE(h.title.empty());
    EXPECT_FALSE(h.summary.empty());
    EXPECT_TRUE(h.train != nullptr) << "train-head --kind " << h.name << " has no trainer";
    const StrategyDescriptor& tree = find_strategy(h.tree_strategy);
    EXPECT_EQ(tree.head_family, h.name) << "its tree strategy drafts with another family's heads";
    EXPECT_EQ(h.load_feature_head == nullptr, h.random_feature_head == nullptr)
        << "a family the EAGLE tree grower drafts with loads trained heads and makes random ones";
    std::set<std::string> keys;
    for (const OptionSpec& o : h.training_options) {
      EXPECT_TRUE(keys.insert(o.key).second) << "--" << o.key << " twice";
      EXPECT_EQ(o.key.find('_'), std::string::npos) << "--" << o.key << ": train-head flags are spelled with dashes";
      if (!o.default_value.empty()) EXPECT_TRUE(o.accepts(o.default_value)) << "--" << o.key << ": default outside its range";
      const auto [it, fresh] = flag_types.emplace(o.key, o.type);
      EXPECT_TRUE(fresh || it->second == o.type) << "--" << o.key << " declared with two types";
    }
  }
  // One fallback family takes the folders nobody recognises.
  EXPECT_EQ(std::count_if(head_family_table().begin(), head_family_table().end(),
                          [](const HeadFamily* h) { return !h->recognises; }),
            1);
  EXPECT_EQ(strategies.size(), strategy_table().size());
}

TEST(StrategyRegistry, OptionsAreCheckedAgainstTheTable) {
  const StrategyDescriptor& eagle2 = find_strategy("eagle2");
  auto resolve = [&](std::vector<std::string> items) { return resolve_options(eagle2, StrategyOptions::parse(items)); };
  expect_error([&] { resolve({"deph=4"}); }, {"strategy eagle2", "unknown option 'deph'", "depth", "top_k"});
  expect_error([&] { resolve({"depth=0"}); }, {"option depth", "expected 1..100000", "'0'"});
  expect_error([&] { resolve({"depth=four"}); }, {"option depth", "'four'"});
  expect_error([&] { resolve({"rank_by=size"}); }, {"option rank_by", "value|confidence", "'size'"});
  expect_error([&] { resolve({"rerank=maybe"}); }, {"option rerank", "true|false"});
  EXPECT_NO_THROW(resolve({"total_tokens=auto"}));
  expect_error([&] { resolve({"total_tokens=often"}); }, {"option total_tokens", "auto", "'often'"});

  // Defaults come from the table; given() tells a default from a given value.
  const StrategyOptions o = resolve({"top_k=4"});
  EXPECT_EQ(o.get_int("top_k"), 4);
  EXPECT_TRUE(o.given("top_k"));
  EXPECT_EQ(std::to_string(o.get_int("depth")), eagle2.option("depth")->default_value);
  EXPECT_FALSE(o.given("depth"));
  EXPECT_EQ(o.get_string("head"), "");
  expect_error([&] { o.get_int("undeclared"); }, {"undeclared", "not declared"});

  expect_error([&] { resolve_options(find_strategy("chain"), StrategyOptions{}); },
               {"strategy chain", "option draft is required"});
  expect_error([&] { find_strategy("eagle3000"); }, {"expected one of", "vanilla", "eagle2", "'eagle3000'"});
}

// "a,b" options (COD's r,r_min for train-lm --parallel and train-head --kind peagle, train-lm's --loss-weights): two
// numbers and nothing else; P-EAGLE's --cod also in range.
TEST(StrategyRegistry, NumberPairsAreTwoNumbersAndNothingElse) {
  double a = 0, b = 0;
  EXPECT_TRUE(parse_option_number_pair("0.7,0.2", &a, &b));
  EXPECT_EQ(a, 0.7);
  EXPECT_EQ(b, 0.2);
  for (const char* bad : {"0.7", "0.7,", ",0.2", "0.7,0.2,0.1", "0.7;0.2", "r,0.2", "0.7,nan", ""})
    EXPECT_FALSE(parse_option_number_pair(bad, &a, &b)) << "'" << bad << "'";
  const HeadFamily& peagle = find_head_family("peagle");
  auto cod = [&](const std::string& text) {
    StrategyOptions o;  // as train-head --kind peagle --cod TEXT resolves its flags
    o.set("cod", text);
    for (const OptionSpec& spec : peagle.training_options) o.set_default(spec.key, spec.default_value);
    peagle.check_training_options(o);
  };
  EXPECT_NO_THROW(cod("0.8,0.2"));
  for (const char* bad : {"0.8", "0.2,0.8", "1.5,0.2", "0.8,0.2,0.1"})
    expect_error([&] { cod(bad); }, {"--cod: expected r,r_min", std::string("'") + bad + "'"});
}

TEST(StrategyRegistry, HelpAndReadmeTableListEveryStrategyAndOption) {
  const std::string help = strategies_help(), table = strategies_markdown();
  for (const StrategyDescriptor* d : strategy_table()) {
    EXPECT_NE(help.find("  " + d->name + ": " + d->summary), std::string::npos) << d->name;
    EXPECT_NE(table.find("| `" + d->name + "` |"), std::string::npos) << d->name;
    for (const auto& o : d->options) EXPECT_NE(help.find("      " + o.key + " = "), std::string::npos) << o.key;
  }
}

TEST(StrategySpec, ParsesNameAndItems) {
  const StrategySpec s = parse_strategy_spec("eagle2:depth=4,top_k=2", "-s");
  EXPECT_EQ(s.name, "eagle2");
  ASSERT_EQ(s.options.size(), 2u);
  EXPECT_EQ(s.options[1], (std::pair<std::string, std::string>{"top_k", "2"}));
  EXPECT_TRUE(parse_strategy_spec("pld", "-s").options.empty());
  expect_error([] { parse_strategy_spec("eagle2:depth", "-s"); }, {"-s eagle2:depth", "key=value", "'depth'"});
  expect_error([] { parse_strategy_spec(":depth=1", "-s"); }, {"-s", "NAME"});
}

}  // namespace
}  // namespace draftlab
