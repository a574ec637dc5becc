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
    EXPECT_EQ(dialect_commands(d).dialect, d);
    EXPECT_NE(dialect_commands(d).run, nullptr);
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

}  // namespace
}  // namespace rpa
