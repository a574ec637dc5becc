// One case through `rpa run`: the options' consistency and the computation, printed by the
// command and returned as arrays by the Python package.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "casefile/case.h"
#include "core/tensor.h"
#include "kernel/jax_kernel.h"
#include "validation/jax_rule.h"
#include "validation/jax_validate.h"
#include "service/case_options.h"
#include "service/rule_report.h"

namespace rpa {

// A failed rule of JAX's table as both doors report it (service/rule_report.h).
RuleReport rule_report(const Failure& f, Mode mode);

// Why a command that computes does not compute a case: one line, and the rule (in `mode`)
// when validation rejected it.
struct Rejection {
  std::string why;
  std::optional<Failure> failure;
  Mode mode = Mode::kStrict;
};

// The validation gate of commands that compute: the case must pass the chosen mode and,
// since only strict-valid inputs have a defined output, strict mode too unless
// needs_definition is false (the literal schedule, which computes what the Pallas kernel
// does on any input jax mode accepts).
std::optional<Rejection> compute_rejection(const Case& c, const CaseOptions& args,
                                           bool needs_definition = true);

// The literal schedule in jax mode: the gate above without the definition, and the dtypes
// the schedule computes with (the Pallas kernel's: q float32 or bfloat16; KV the kernel
// floats, float16 or integers up to 32 bits).
std::optional<Rejection> literal_jax_rejection(const Case& c, const CaseOptions& args);

// KernelOptions for the tiled kernel as the options ask for it.
KernelOptions kernel_options(const CaseOptions& args);

struct RunOutcome {
  std::optional<Rejection> rejection;  // set when validation rejected the case
  std::optional<Tensor> out;           // otherwise o [T, Hq, D] in q's dtype
};

// The validation gate of `rpa run`: the literal schedule under --mode jax needs only an input
// the Pallas kernel runs on (literal_jax_rejection); everything else a strict-valid one
// (compute_rejection). nullopt when the case may be computed.
std::optional<Rejection> run_rejection(const Case& c, const CaseOptions& a);

// Validates the case as `rpa run` does (the literal schedule under --mode jax needs only an
// input the Pallas kernel runs on; everything else a strict-valid one) and computes it with
// a.impl. Precondition: run_options_error(a) is "" and c is a jax case (a v3 case throws
// std::invalid_argument: v3_run_case in service/v3_run_case.h computes it, cache included).
RunOutcome run_case(const Case& c, const CaseOptions& a);

// What rpa run --json reports of a computation besides the output: the rows the sequences
// define (cu_q_lens[num_seqs], clipped to q; jax mode's literal schedule also takes a
// negative one) and, for the kernel, its grid and blocks. Precondition: run_case(c, a) did
// not reject the case.
struct RunReport {
  int64_t rows = 0;
  std::optional<KernelPlan> plan;  // --impl kernel
};
RunReport run_report(const Case& c, const CaseOptions& a);

}  // namespace rpa
