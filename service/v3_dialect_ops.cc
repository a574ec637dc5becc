#include "service/v3_dialect_ops.h"

#include <optional>
#include <utility>

#include "schedule/v3_program.h"
#include "service/v3_check_case.h"
#include "service/v3_run_case.h"
#include "validation/v3_validate.h"

namespace rpa {
namespace {

template <Dialect D>
std::vector<DialectRule> v3_rules() {
  std::vector<DialectRule> out;
  for (const V3RuleInfo& r : v3_rule_table()) {
    out.push_back({.name = r.name, .in_native = r.in(D, Mode::kJax),
                   .in_strict = r.in(D, Mode::kStrict), .crash = r.crash, .reason = r.reason});
  }
  return out;
}

// The v3 rules hold no target: the generation changes the program, not what it accepts.
std::vector<RuleReport> v3_failures(const Case& c, const ValidateOptions& o, bool all) {
  std::vector<V3Failure> fs;
  if (all) {
    fs = v3_validate_all(c.dialect, c.v3_inputs, c.v3_params, o.mode);
  } else if (std::optional<V3Failure> f = v3_validate(c.dialect, c.v3_inputs, c.v3_params, o.mode)) {
    fs.push_back(std::move(*f));
  }
  std::vector<RuleReport> out;
  for (const V3Failure& f : fs) out.push_back(rule_report(f, o.mode));
  return out;
}

// The target generation's program, walked without its arithmetic.
PathFeatures v3_walk_features(const Case& c, const TargetProfile& target) {
  return v3_path_features(c.dialect, c.v3_inputs, c.v3_params, tpu_generation(target));
}

// Both v3 dialects run the same v3 functions; only the rule table's native column differs.
template <Dialect D>
constexpr DialectOps v3_entry() {
  return {
      .dialect = D,
      .native_mode = "native",
      .reports_dialect = true,
      .rules = v3_rules<D>,
      .failures = v3_failures,
      .walk_features = v3_walk_features,
      .check = v3_check,
  };
}

}  // namespace

const DialectOps kV3DialectOps = v3_entry<Dialect::kTpuInferenceV3>();
const DialectOps kV3Hd64DialectOps = v3_entry<Dialect::kTpuInferenceV3Hd64>();

}  // namespace rpa
