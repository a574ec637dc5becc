// A case of a tpu-inference v3 dialect through the service (DESIGN.md sections 8 and 16): the
// validation gate of computing it (the v3 rule table's, validation/v3_validate.h, in native or
// strict mode) and rpa run's computation (the v3 reference, the tiled kernel or the literal v3
// schedule), returning `out` and the cache after the call. Both doors call it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "casefile/case.h"
#include "core/tensor.h"
#include "schedule/v3_program.h"
#include "service/case_options.h"
#include "service/rule_report.h"
#include "validation/v3_rule.h"

namespace rpa {

// A failed rule of the v3 table as both doors report it (service/rule_report.h).
RuleReport rule_report(const V3Failure& f, Mode mode);

// "native" or "strict": Mode::kJax is a dialect's native mode.
std::string_view v3_mode_name(Mode m);

// The validation gate of computing a v3 case: the chosen mode, then strict (only a
// strict-valid case has a defined output). nullopt when it may be computed.
struct V3Rejection {
  V3Failure failure;
  Mode mode = Mode::kStrict;
};
std::optional<V3Rejection> v3_compute_rejection(const Case& c, Mode mode);

// A rejection in one line: "PATH: rejected in MODE mode (DIALECT) by RULE: ...".
std::string v3_rejection_line(const CaseOptions& a, Dialect d, const V3Rejection& r);

// rpa run's computation of a v3 case, as the command and the Python binding do it: the
// strict gate (v3_compute_rejection in a.validate.mode, then strict), then a.impl: the v3
// reference in a.reference_semantics(), or v3_tiled_attention with a.threads; with
// a.literal, the gate is a.validate.mode's alone and the literal v3 schedule runs
// (schedule/v3_program.h, on a.validate.target's generation), which computes what the kernel
// does on any input the mode accepts, or stops where the kernel does not return.
// Precondition: run_options_error(a) is "".
struct V3RunOutcome {
  std::optional<V3Rejection> rejection;  // set when validation rejected the case
  std::optional<Tensor> out;             // otherwise [T, Hq, D] in the queries' dtype
  std::optional<Tensor> kv_cache;        // and the cache after the call
  // The literal schedule: why the kernel does not return on this input, as "KIND: what"
  // (KIND trace, run or hang; schedule/v3_program.h); out and kv_cache are then unset.
  std::optional<std::string> kernel_stop;
  // The literal schedule: why it cannot run this call (an hd64 call without its block sizes).
  std::optional<std::string> not_applicable;
};

// Why the kernel does not return, as "KIND: what" (KIND trace, run or hang), from the
// literal schedule's stop; and the one line both doors say for it: "the literal v3 schedule
// stops where the kernel does not return (KIND: what)".
std::string v3_kernel_stop(const V3ProgramError& e);
std::string v3_kernel_stop_line(std::string_view stop);

// The literal v3 schedule's options for these arguments (the target's generation).
V3ProgramOptions v3_program_options(const CaseOptions& a);
V3RunOutcome v3_run_case(const Case& c, const CaseOptions& a);

// The rows a strict-valid v3 case defines: cu_q_lens[distribution[2]].
int64_t v3_rows(const Case& c);

}  // namespace rpa
