// The (rule, dialect) pairs the v3 rule table enforces in strict mode that no input reaches
// (DESIGN.md section 16): strict mode enforces some rules only for the dialect whose arrays or
// keywords they name, and an earlier rule covers some others. V3Mutations.ReachEveryRule and
// the Python strategies' reach test (tests/python/test_strategies.py) check every other
// strict rule is reached, and that none of these is.
#pragma once

#include <span>

#include "core/dialect.h"
#include "validation/v3_rule.h"

namespace rpa::props {

struct V3Unreachable {
  V3RuleId rule;
  Dialect dialect;
  const char* reason;
};

std::span<const V3Unreachable> v3_strict_unreachable();
// Whether (rule, d) is one of them.
bool v3_strict_unreachable(V3RuleId rule, Dialect d);

}  // namespace rpa::props
