// How far an implementation may be from the dense reference and still agree
// (DESIGN.md section 6).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"

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
// float32 arithmetic (item F, float32_terms in oracle/jax_tolerance.h). Each dialect's
// tolerance of a case builds on them (oracle/jax_tolerance.h, oracle/v3_compare.h). q_dtype is the output's dtype; v_dtype is
// V_eff's (q's when v_scale is set, else the KV dtype); max_abs_v is max |V_eff| over the
// tokens read; max_kv_len the longest sequence that produced rows.
Tolerance tolerance_for(DType q_dtype, DType v_dtype, double max_abs_v, int64_t max_kv_len);

// The relative error of exp in float32 that item F assumes of every implementation: eight
// float32 ulps (2^-21). tests/exp_accuracy_test.cc measures the two this project uses: Eigen's
// vectorized float exp (the tiled kernel's weights) 5.0 ulps at worst, std::exp(float) 1.0.
inline constexpr double kExpError = 0x1p-21;

// Bits of precision (significand bits, the implicit one included) of a float dtype, and its
// smallest positive subnormal (below it, values round to 0 whatever the precision).
int precision_bits(DType t);
double min_subnormal(DType t);

}  // namespace rpa
