// rpa check on a case of a tpu-inference v3 dialect (DESIGN.md sections 8 and 16): its `out` and
// `kv_cache_out` (else the tiled kernel's or the literal schedule's) against the v3 reference,
// or against the literal v3 schedule, and what the reports show of it (service/check_case.h's
// CheckFindings).
#pragma once

#include <optional>
#include <string>

#include "casefile/case.h"
#include "oracle/v3_compare.h"
#include "reference/semantics.h"
#include "schedule/v3_program.h"
#include "service/case_options.h"
#include "service/check_case.h"
#include "service/json_writer.h"
#include "service/v3_run_case.h"

namespace rpa {

// The v3 dialects' check (DialectOps::check), untimed.
CheckOutcome v3_check(const Case& c, const CaseOptions& a);

// A v3 case's own out and kv_cache_out against an oracle, with no validation gate (the caller
// has validated: strict for the reference, the native mode for the literal schedule): the v3
// reference in `semantics` (oracle/v3_compare.h's tolerance, the check's power stated), or
// with `literal` the literal v3 schedule on `program`'s generation under the schedule
// tolerance. kernel_stop ("KIND: what") where the literal schedule says the kernel does not
// return; nothing is compared then. v3_check's literal oracle and the Python binding's
// v3_check both call it. Precondition: the case holds out and kv_cache_out.
struct V3OutCheck {
  V3Comparison cmp;
  std::optional<std::string> kernel_stop;
};
V3OutCheck v3_check_out(const Case& c, Semantics semantics, bool literal,
                        const V3ProgramOptions& program);

// The check's power in words, with whether an all-zero output fails: "catches a dropped key of
// weight >= 0.0031 (in every row: 0.2), rejects an all-zero output".
std::string v3_power_phrase(const V3Comparison& c);

// The one-line summary of a v3 comparison (rpa check on many cases, replay, campaign), e.g.
// "0.43 of tolerance (max error 0.0012, tolerance there 0.0028); cache equal".
std::string v3_comparison_summary(const V3Comparison& c);
// A v3 comparison's fields in an open JSON object.
void write_v3_comparison_json(JsonWriter& j, const V3Comparison& c);

}  // namespace rpa
