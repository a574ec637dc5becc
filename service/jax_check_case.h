// rpa check on a case of JAX's dialect (DESIGN.md section 8): its `out` (else the tiled
// kernel's) against the dense reference or the literal schedule, and what the reports show of
// it (service/check_case.h's CheckFindings).
#pragma once

#include <optional>
#include <string>

#include "casefile/case.h"
#include "oracle/compare.h"
#include "service/case_options.h"
#include "service/check_case.h"
#include "service/jax_run_case.h"
#include "service/json_writer.h"

namespace rpa {

// The jax dialect's check (DialectOps::check), untimed.
CheckOutcome jax_check(const Case& c, const CaseOptions& a);

}  // namespace rpa
