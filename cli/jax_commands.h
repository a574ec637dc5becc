// rpa run and rpa check on a case of JAX's dialect (DESIGN.md section 8): what the commands
// print of the service's jax gate and run (service/jax_run_case.h).
#pragma once

#include "casefile/case.h"
#include "cli/cli_args.h"
#include "service/jax_run_case.h"

namespace rpa {

// Prints a rejection: "PATH: why" on stderr and, with --json, its JSON object on stdout.
void report_rejection(const CliArgs& args, const Rejection& r);

// rpa run on a jax case (args parsed and consistent, case read); returns the exit code.
int run_jax(Case c, const CliArgs& a);

}  // namespace rpa
