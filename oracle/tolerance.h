// How far an implementation may be from the dense reference and still agree
// (DESIGN.md section 6).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "kernel/jax_kernel.h"
#include "oracle/dot_precision.h"
#include "reference/jax_reference.h"

namespace rpa {

// |got - want| <= atol + element_atol[e] + rtol * |want| element-wise.
struct Tolerance {
  Tolerance() = default;
  Tolerance(double a, double r) : atol(a), rtol(r) {}

  double atol = 0.0;
  double rtol = 0.0;
  // M = max |V_eff| of the case (0 where unknown): the scale in which the check's power is
  // stated (Comparison::min_detectable_key_weight).
  double value_scale = 0.0;
  // Optional: more absolute allowance for some elements (q's layout, one per element of
  // the output), e.g. the kernel semantics' bound on logit errors, which depends on the row.
  std::shared_ptr<const std::vector<double>> element_atol;

  // The difference allowed at output element e whose wanted value is `want`.
  double allowed(int64_t e, double want) const {
    const double extra = element_atol ? (*element_atol)[static_cast<size_t>(e)] : 0.0;
    return atol + extra + rtol * std::fabs(want);
  }
  // The largest element_atol entry (0 without one).
  double max_element_atol() const;
  // Every allowance times k.
  Tolerance scaled(double k) const;
};

// The reference semantics' dtype terms for one case (items 2 to 4 of tolerance.cc): the
// rounding of p, of p.V and of the output to narrower dtypes, and flushed subnormals; no
// float32 arithmetic (item F, float32_terms). q_dtype is the output's dtype; v_dtype is
// V_eff's (q's when v_scale is set, else the KV dtype); max_abs_v is max |V_eff| over the
// tokens read; max_kv_len the longest sequence that produced rows.
Tolerance tolerance_for(DType q_dtype, DType v_dtype, double max_abs_v, int64_t max_kv_len);

// The tolerance for comparing an output of (in, p) with the dense reference's result r, in
// r's semantics (derivations in tolerance.cc). What every caller should use.
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

// Item F of tolerance.cc, per element of the output (q's layout, 0 on rows no sequence
// defines): how far any float32 computation of r's weighted sums, in any order and blocking,
// can be from r's, for both semantics. passes: the MXU's, for the kernel semantics' p.V.
std::vector<double> float32_terms(const Inputs& in, const Params& p, const ReferenceResult& r,
                                  DotPasses passes = DotPasses::kSix);

// Item K3 of tolerance.cc per element (q's layout): how far the logit errors e_qk B_t can
// move each output, e_qk g(e_qk B_max) r.spread[e] (kernel semantics; not yet cut to 2M).
std::vector<double> kernel_logit_terms(const Inputs& in, const Params& p, const ReferenceResult& r,
                                       DotPasses passes = DotPasses::kSix);

// The relative logit error e_qk kernel_tolerance assumes per unit of B_t (item K3): between
// kLeastLogitError and most_logit_error(passes) (jax_reference.h, dot_precision.h).
double kernel_logit_error(const Inputs& in, const Params& p, DotPasses passes = DotPasses::kSix);

// The relative error of exp in float32 that item F assumes of every implementation: eight
// float32 ulps (2^-21). tests/exp_accuracy_test.cc measures the two this project uses: Eigen's
// vectorized float exp (the tiled kernel's weights) 5.0 ulps at worst, std::exp(float) 1.0.
inline constexpr double kExpError = 0x1p-21;

// The tolerance for comparing an output with the literal schedule's (the Pallas program,
// KernelOptions::literal_schedule, run with `plan`), e.g. the Pallas kernel's own output:
// derivation in tolerance.cc. Needs no reference, so it applies to any input jax mode
// accepts on which the literal schedule runs.
Tolerance schedule_tolerance(const Inputs& in, const Params& p, const KernelPlan& plan);

// Bits of precision (significand bits, the implicit one included) of a float dtype.
int precision_bits(DType t);

}  // namespace rpa
