// A dialect behind one interface (DESIGN.md section 16, issue 48): what the service and the two
// doors ask of every dialect, so that a generic file asks dialect_ops(case.dialect) instead of
// naming the dialects. Each dialect fills one DialectOps in its own file
// (service/jax_dialect_ops.cc, service/v3_dialect_ops.cc); service/dialect_registry.cc, the one
// service file that names them all, lists them. tests/dialect_registry_test.cc fails when a
// dialect of core/dialect.h is not registered or its entry lacks a piece.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "casefile/case.h"
#include "core/dialect.h"
#include "schedule/path_features.h"
#include "service/case_options.h"
#include "service/check_case.h"
#include "service/rule_report.h"
#include "validation/mode.h"
#include "validation/target_profile.h"

namespace rpa {

// One rule of a dialect's table, as every dialect describes it.
struct DialectRule {
  std::string_view name;    // the stable snake_case id
  bool in_native = false;   // enforced in the dialect's native mode (Mode::kJax)
  bool in_strict = false;   // enforced in strict mode
  bool crash = false;       // native mode: the dialect's own code crashes instead of raising
  std::string_view reason;  // one line: why the rule exists
};

struct DialectOps {
  Dialect dialect = Dialect::kJax;
  // The name of its native mode (Mode::kJax): "jax" for JAX's kernel, "native" for the others.
  std::string_view native_mode;
  // Whether validate's lines and JSON name the dialect ("valid in strict mode
  // (tpu_inference_v3)"); the jax dialect's reports predate dialects and do not.
  bool reports_dialect = false;
  // Its rule table, in check order.
  std::vector<DialectRule> (*rules)() = nullptr;
  // The rules the case fails in o.mode, in table order: every one (all) or only the first.
  // Empty: valid. Reads the case's index arrays and shapes, never q or the cache's data.
  std::vector<RuleReport> (*failures)(const Case& c, const ValidateOptions& o, bool all) = nullptr;
  // The path features of the program a call its native mode accepts runs on target
  // (schedule/path_features.h): what the kernel campaign covers.
  PathFeatures (*walk_features)(const Case& c, const TargetProfile& target) = nullptr;
  // rpa check on a case of the dialect (service/check_case.h; check_case times it): the
  // verdict and the findings behind it.
  CheckOutcome (*check)(const Case& c, const CaseOptions& a) = nullptr;
};

// The registered dialect's entry; every Dialect of core/dialect.h has one.
const DialectOps& dialect_ops(Dialect d);
// Every registered dialect's entry, in core/dialect.h's order.
std::span<const DialectOps* const> registered_dialects();

// The mode's name for the dialect: its native_mode for Mode::kJax, "strict" for strict.
std::string_view mode_label(Dialect d, Mode m);

}  // namespace rpa
