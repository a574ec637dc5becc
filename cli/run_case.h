// One case through `rpa run`: the options' consistency and the computation, printed by the
// command and returned as arrays by the Python package.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "casefile/case.h"
#include "cli/cli_args.h"
#include "kernel/tensor.h"
#include "kernel/tiled_kernel.h"

namespace rpa {

// The options rpa run takes.
inline const std::set<std::string_view> kRunFlags = {
    "--impl", "-o", "--threads", "--literal", "--schedule", "--semantics", "--mode", "--json",
    "--target", "--max-bytes"};

// Why run's options do not fit together ("" when they do): --impl missing or unknown,
// --schedule literal without the kernel, --semantics without the reference.
std::string run_options_error(const CliArgs& a);

struct RunOutcome {
  std::optional<Rejection> rejection;  // set when validation rejected the case
  std::optional<Tensor> out;           // otherwise o [T, Hq, D] in q's dtype
};

// The validation gate of `rpa run`: the literal schedule under --mode jax needs only an input
// the Pallas kernel runs on (literal_jax_rejection); everything else a strict-valid one
// (compute_rejection). nullopt when the case may be computed.
std::optional<Rejection> run_rejection(const Case& c, const CliArgs& a);

// Validates the case as `rpa run` does (the literal schedule under --mode jax needs only an
// input the Pallas kernel runs on; everything else a strict-valid one) and computes it with
// a.impl. Precondition: run_options_error(a) is "" and c is a jax case (a v3 case throws
// std::invalid_argument: v3_run_case in cli/v3_commands.h computes it, cache included).
RunOutcome run_case(const Case& c, const CliArgs& a);

// What rpa run --json reports of a computation besides the output: the rows the sequences
// define (cu_q_lens[num_seqs], clipped to q; jax mode's literal schedule also takes a
// negative one) and, for the kernel, its grid and blocks. Precondition: run_case(c, a) did
// not reject the case.
struct RunReport {
  int64_t rows = 0;
  std::optional<KernelPlan> plan;  // --impl kernel
};
RunReport run_report(const Case& c, const CliArgs& a);

}  // namespace rpa
