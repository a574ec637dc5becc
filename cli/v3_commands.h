// rpa validate and rpa run on a case of a tpu-inference v3 dialect (DESIGN.md sections 8 and
// 16): the commands read the case, see its dialect and hand it here; what they print of the
// service's v3 gate and run (service/v3_run_case.h).
#pragma once

#include "casefile/case.h"
#include "cli/cli_args.h"
#include "service/v3_run_case.h"

namespace rpa {

// Prints a rejection as the commands do: the line on stderr and, with --json, {"valid": false,
// "mode", "dialect", "rule", "message"} on stdout.
void report_v3_rejection(const CliArgs& a, Dialect d, const V3Rejection& r);

// rpa validate on a v3 case (args parsed, case read); returns the exit code.
int validate_v3(const Case& c, const CliArgs& a);
// rpa run on a v3 case (args parsed and consistent, case read); returns the exit code.
int run_v3(Case c, const CliArgs& a);

}  // namespace rpa
