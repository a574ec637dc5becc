// How far an implementation may be from the dense reference and still agree
// (DESIGN.md section 6).
#pragma once

#include <cstdint>

#include "kernel/dtype.h"
#include "kernel/inputs.h"
#include "kernel/params.h"
#include "kernel/tiled_kernel.h"
#include "reference/dense_reference.h"

namespace rpa {

// |got - want| <= atol + rtol * |want| element-wise.
struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
};

// The tolerance for one case. q_dtype is the output's dtype; v_dtype is V_eff's (q's when
// v_scale is set, else the KV dtype); max_abs_v is max |V_eff| over the tokens read;
// max_kv_len the longest sequence that produced rows. The derivation is in the
// definition's comment.
Tolerance tolerance_for(DType q_dtype, DType v_dtype, double max_abs_v, int64_t max_kv_len);

// The tolerance for comparing an output of (in, p) with the dense reference's result r:
// tolerance_for plus the float32 rounding of large logits, 2 * M * 2^-24 *
// r.max_logit_abs_sum (derivation in tolerance.cc). What every caller should use.
Tolerance tolerance_for_case(const Inputs& in, const Params& p, const ReferenceResult& r);

// The tolerance for comparing an output with the literal schedule's (the Pallas program,
// KernelOptions::literal_schedule, run with `plan`), e.g. the Pallas kernel's own output:
// derivation in tolerance.cc. Needs no reference, so it applies to any input jax mode
// accepts on which the literal schedule runs.
Tolerance schedule_tolerance(const Inputs& in, const Params& p, const KernelPlan& plan);

// Bits of precision (significand bits, the implicit one included) of a float dtype.
int precision_bits(DType t);

}  // namespace rpa
