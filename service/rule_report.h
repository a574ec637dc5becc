// A failed validation rule of either dialect as both doors report it: its id, its message and
// whether the dialect's own code crashes there instead of raising (native mode), in one line
// of text or as JSON fields. One shape for every dialect, so the reports are written once.
#pragma once

#include <string>
#include <string_view>

#include "service/json_writer.h"
#include "validation/mode.h"

namespace rpa {

struct RuleReport {
  std::string_view rule;  // the rule's stable snake_case id
  std::string message;
  bool crash = false;     // native mode, and the dialect's code crashes there (jax_crash)
  std::string_view who;   // whose code: "JAX" or "tpu-inference"
};

// Each dialect makes one from its own failure: rule_report(const Failure&, Mode) in
// service/jax_run_case.h, rule_report(const V3Failure&, Mode) in service/v3_run_case.h.

// "rule_id: message", with a note where the dialect's code crashes instead of raising its
// ValueError.
std::string rule_line(const RuleReport& r);
// Adds "rule", "message" (and "jax_crash", the key both dialects and the Python API use,
// docs/cli.md) to an open JSON object.
void write_rule_json(JsonWriter& j, const RuleReport& r);

}  // namespace rpa
