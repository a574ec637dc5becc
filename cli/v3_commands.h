// rpa run and rpa check on a case of a tpu-inference v3 dialect (DESIGN.md sections 8 and 16):
// what the commands print of the service's v3 gate and run (service/v3_run_case.h).
#pragma once

#include "casefile/case.h"
#include "cli/cli_args.h"
#include "service/v3_run_case.h"

namespace rpa {

// Prints a rejection as the commands do: the line on stderr and, with --json, {"valid": false,
// "mode", "dialect", "rule", "message"} on stdout.
void report_v3_rejection(const CliArgs& a, Dialect d, const V3Rejection& r);

// rpa run on a v3 case (args parsed and consistent, case read); returns the exit code.
int run_v3(Case c, const CliArgs& a);

}  // namespace rpa
