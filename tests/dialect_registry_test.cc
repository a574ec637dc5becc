// The dialect registries (service/dialect_ops.h, cli/dialect_commands.h; issue 48): every
// dialect of core/dialect.h is registered once, in order, and its entries have every piece of
// the interface. A dialect added to the enum without an entry, or with a piece left out (a
// null function), fails here.
#include <gtest/gtest.h>

#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cli/dialect_commands.h"
#include "casegen/dialect_generator.h"
#include "harness/input_families.h"
#include "service/dialect_ops.h"
#include "service/path_features.h"

namespace rpa {
namespace {

TEST(DialectRegistry, RegistersEveryDialectOnceInOrder) {
  const auto registered = registered_dialects();
  ASSERT_EQ(registered.size(), std::size(kDialects));
  for (size_t i = 0; i < registered.size(); ++i) {
    EXPECT_EQ(registered[i]->dialect, kDialects[i]) << dialect_name(kDialects[i]);
    EXPECT_EQ(&dialect_ops(kDialects[i]), registered[i]) << dialect_name(kDialects[i]);
  }
}

TEST(DialectRegistry, EveryEntryHasEveryPiece) {
  for (const Dialect d : kDialects) {
    SCOPED_TRACE(std::string(dialect_name(d)));
    const DialectOps& ops = dialect_ops(d);
    EXPECT_FALSE(ops.native_mode.empty());
    EXPECT_NE(ops.native_mode, "strict");
    EXPECT_NE(ops.rules, nullptr);
    EXPECT_NE(ops.failures, nullptr);
    EXPECT_NE(ops.walk_features, nullptr);
    EXPECT_NE(ops.check, nullptr);
    EXPECT_EQ(dialect_commands(d).dialect, d);
    EXPECT_NE(dialect_commands(d).run, nullptr);
    // rpa campaign's pieces.
    EXPECT_NE(dialect_commands(d).campaign_case, nullptr);
    EXPECT_NE(dialect_commands(d).campaign_production, nullptr);
    EXPECT_NE(dialect_commands(d).write_finding_file, nullptr);
    // rpa gen's part and the generator registry's entry (casegen/dialect_generator.h).
    EXPECT_NE(dialect_commands(d).gen, nullptr);
    EXPECT_EQ(props::dialect_generator(d).dialect, d);
    EXPECT_NE(props::dialect_generator(d).production_cache_token_bytes, nullptr);
    EXPECT_NE(props::dialect_generator(d).production_call, nullptr);
    EXPECT_EQ(mode_label(d, Mode::kStrict), "strict");
    EXPECT_EQ(mode_label(d, Mode::kJax), ops.native_mode);
  }
}

// Each table names its rules once, and each rule is enforced in at least one mode.
TEST(DialectRegistry, RuleTablesAreWellFormed) {
  for (const Dialect d : kDialects) {
    SCOPED_TRACE(std::string(dialect_name(d)));
    const std::vector<DialectRule> rules = dialect_ops(d).rules();
    ASSERT_FALSE(rules.empty());
    std::set<std::string_view> names;
    for (const DialectRule& r : rules) {
      EXPECT_TRUE(names.insert(r.name).second) << "twice: " << r.name;
      EXPECT_FALSE(r.reason.empty()) << r.name;
    }
  }
}

// A case with no arrays is rejected in both modes, by rules of the dialect's own table that
// the mode enforces, the first of `all` being the one failure without it.
TEST(DialectRegistry, AnEmptyCaseFailsRulesOfItsOwnTable) {
  for (const Dialect d : kDialects) {
    SCOPED_TRACE(std::string(dialect_name(d)));
    const DialectOps& ops = dialect_ops(d);
    Case c;
    c.dialect = d;
    for (const Mode mode : {Mode::kJax, Mode::kStrict}) {
      const std::vector<RuleReport> first = ops.failures(c, {.mode = mode}, false);
      const std::vector<RuleReport> all = ops.failures(c, {.mode = mode}, true);
      ASSERT_EQ(first.size(), 1u);
      ASSERT_GE(all.size(), 1u);
      EXPECT_EQ(all.front().rule, first.front().rule);
      for (const RuleReport& f : all) {
        bool found = false;
        for (const DialectRule& r : ops.rules()) {
          if (r.name == f.rule) found = mode == Mode::kJax ? r.in_native : r.in_strict;
        }
        EXPECT_TRUE(found) << f.rule << " in " << mode_label(d, mode);
      }
    }
  }
}

TEST(DialectRegistry, PathFeaturesOfARejectedCallNameItsRule) {
  for (const Dialect d : kDialects) {
    Case c;
    c.dialect = d;
    const std::vector<RuleReport> bad = dialect_ops(d).failures(c, {.mode = Mode::kJax}, false);
    ASSERT_EQ(bad.size(), 1u);
    const PathFeatures f = case_path_features(c, default_target_profile());
    EXPECT_EQ(f.size(), 1u);
    EXPECT_EQ(f.count("rejected." + std::string(bad.front().rule)), 1) << dialect_name(d);
  }
}

// The fuzz inputs' families (harness/input_families.h): every piece set, the tags distinct
// with one untagged family, and every dialect's production calls owned by exactly one family.
TEST(DialectRegistry, InputFamiliesCoverEveryDialectOnce) {
  std::set<std::string> tags;
  int untagged = 0;
  for (const fuzz::InputFamily* f : fuzz::input_families()) {
    SCOPED_TRACE(std::string(f->name));
    EXPECT_NE(f->owns, nullptr);
    EXPECT_NE(f->validate, nullptr);
    EXPECT_NE(f->differential, nullptr);
    EXPECT_NE(f->raw, nullptr);
    EXPECT_NE(f->production, nullptr);
    EXPECT_NE(f->time_production, nullptr);
    EXPECT_TRUE(f->tag.empty() || f->tag.size() == 2u);
    EXPECT_TRUE(tags.insert(std::string(f->tag.begin(), f->tag.end())).second) << "a tag twice";
    untagged += f->tag.empty() ? 1 : 0;
  }
  EXPECT_EQ(untagged, 1);
  for (const Dialect d : kDialects) {
    int owners = 0;
    for (const fuzz::InputFamily* f : fuzz::input_families()) owners += f->owns(d) ? 1 : 0;
    EXPECT_EQ(owners, 1) << dialect_name(d);
    EXPECT_TRUE(fuzz::family_of(d).owns(d)) << dialect_name(d);
  }
  // A tagged input goes to its family with the tag stripped; anything else is the untagged
  // family's whole.
  for (const fuzz::InputFamily* f : fuzz::input_families()) {
    std::vector<uint8_t> bytes = f->tag;
    bytes.push_back(7);
    const fuzz::FamilyInput in = fuzz::input_family(bytes);
    EXPECT_EQ(in.family, f);
    ASSERT_EQ(in.payload.size(), 1u);
    EXPECT_EQ(in.payload[0], 7);
  }
}

}  // namespace
}  // namespace rpa
