// rpa validate and rpa run on a case of a tpu-inference v3 dialect (DESIGN.md sections 8 and
// 16): the commands read the case, see its dialect and hand it here. Validation is the v3
// rule table's (kernel/v3_validate.h) in native or strict mode; run computes with the v3
// reference (reference/v3_reference.h) and writes `out` and `kv_cache_out`.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "casefile/case.h"
#include "cli/cli_args.h"
#include "cli/json_writer.h"
#include "kernel/v3_rule.h"

namespace rpa {

// "native" or "strict": Mode::kJax is a dialect's native mode.
std::string_view v3_mode_name(Mode m);

// "rule_id: message", with a note where tpu-inference crashes there instead of raising its
// ValueError.
std::string v3_failure_line(const V3Failure& f, Mode mode);
// Adds "rule", "message" (and "crash") to an open JSON object.
void write_v3_failure_json(JsonWriter& j, const V3Failure& f, Mode mode);

// The validation gate of computing a v3 case: the chosen mode, then strict (only a
// strict-valid case has a defined output). nullopt when it may be computed.
struct V3Rejection {
  V3Failure failure;
  Mode mode = Mode::kStrict;
};
std::optional<V3Rejection> v3_compute_rejection(const Case& c, Mode mode);

// rpa validate on a v3 case (args parsed, case read); returns the exit code.
int validate_v3(const Case& c, const CliArgs& a);
// rpa run on a v3 case (args parsed and consistent, case read); returns the exit code.
int run_v3(Case c, const CliArgs& a);

}  // namespace rpa
