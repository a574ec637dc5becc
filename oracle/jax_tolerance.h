// The tolerances of a jax call (DESIGN.md section 6; derivations in jax_tolerance.cc): against
// the dense reference in either semantics, and against the literal schedule. Built on
// oracle/tolerance.h's dtype terms; tpu-inference v3's (oracle/v3_compare.h) on these.
#pragma once

#include <cstdint>
#include <vector>

#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "kernel/jax_kernel.h"
#include "oracle/dot_precision.h"
#include "oracle/tolerance.h"
#include "reference/jax_reference.h"

namespace rpa {

// The tolerance for comparing an output of (in, p) with the dense reference's result r, in
// r's semantics (derivations in jax_tolerance.cc). What every caller should use.
// - reference semantics: tolerance_for, the float32 rounding of large logits
//   (2 * M * 2^-24 * r.max_logit_abs_sum) and per element the float32 term (item F);
// - kernel semantics: kernel_tolerance.
// `passes` is how a TPU evaluates float32 dots (kernel semantics only; r must have been
// computed with most_logit_error(passes) or more).
Tolerance tolerance_for_case(const Inputs& in, const Params& p, const ReferenceResult& r,
                             DotPasses passes = DotPasses::kSix);

// The kernel semantics' tolerance: per element the float32 accumulation term (item F), a
// TPU's bfloat16 MXU passes on float32 operands, and the logit errors r.spread bounds;
// never the rounding of p. Needs r computed in the kernel semantics.
Tolerance kernel_tolerance(const Inputs& in, const Params& p, const ReferenceResult& r,
                           DotPasses passes = DotPasses::kSix);

// Item F of tolerance.cc (derived in jax_tolerance.cc), per element of the output (q's layout, 0 on rows no sequence
// defines): how far any float32 computation of r's weighted sums, in any order and blocking,
// can be from r's, for both semantics. passes: the MXU's, for the kernel semantics' p.V.
std::vector<double> float32_terms(const Inputs& in, const Params& p, const ReferenceResult& r,
                                  DotPasses passes = DotPasses::kSix);

// Item K3 of jax_tolerance.cc per element (q's layout): how far the logit errors e_qk B_t can
// move each output, e_qk g(e_qk B_max) r.spread[e] (kernel semantics; not yet cut to 2M).
std::vector<double> kernel_logit_terms(const Inputs& in, const Params& p, const ReferenceResult& r,
                                       DotPasses passes = DotPasses::kSix);

// The relative logit error e_qk kernel_tolerance assumes per unit of B_t (item K3): between
// kLeastLogitError and most_logit_error(passes) (jax_reference.h, dot_precision.h).
double kernel_logit_error(const Inputs& in, const Params& p, DotPasses passes = DotPasses::kSix);

// The tolerance for comparing an output with the literal schedule's (the Pallas program,
// KernelOptions::literal_schedule, run with `plan`), e.g. the Pallas kernel's own output:
// derivation in jax_tolerance.cc. Needs no reference, so it applies to any input jax mode
// accepts on which the literal schedule runs.
Tolerance schedule_tolerance(const Inputs& in, const Params& p, const KernelPlan& plan);

}  // namespace rpa
