#include "oracle/tolerance.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

namespace rpa {

int precision_bits(DType t) {
  if (!is_kernel_kv_dtype(t)) throw std::logic_error("precision_bits: not a kernel float dtype");
  return dtype_precision_bits(t);
}

// Smallest positive subnormal: below it, values round to 0 regardless of precision.
double min_subnormal(DType t) {
  if (!is_kernel_kv_dtype(t)) throw std::logic_error("min_subnormal: not a kernel float dtype");
  return dtype_min_subnormal(t);
}

// Every output is o = sum_t p_t v_t with p_t >= 0, sum_t p_t = 1, so |o| <= max|V_eff| =: M.
// Two correct implementations differ only by where and how they round:
//
// F. Float32 arithmetic: exp, the running sums of the softmax's numerator and denominator,
//    an online softmax's rescaling, the division. Derived per element in
//    oracle/jax_tolerance.cc (float32_terms);
//    it replaces the measured 1e-5 M budget of earlier versions (finding 12).
// 2. Rounding p to V_eff's dtype (JAX's reference does, the TPU kernel feeds unrounded f32
//    weights to the MXU): one side may land one ulp away from the other per p_t, i.e. at
//    most 2^(1-prec) * p_t, or the smallest subnormal where p_t underflows. Summed against
//    |v_t| <= M: (2^(1-prec) + kv_len * min_subnormal) * M. Only when V_eff is narrower
//    than float32.
// 3. Rounding the product to V_eff's dtype and then to q's dtype: a value within the
//    budget above can round to the neighbouring representable number, one ulp of the
//    result: 2^(1-prec) * |want| for each narrower-than-float32 rounding, or, where the
//    result is subnormal in that dtype, one smallest subnormal (an absolute term).
//
// 4. Subnormal float32 values: TPUs (and the tiled kernel, for speed) flush them to zero,
//    the reference keeps them. Each of the kv_len products p_t v_t may lose up to the
//    smallest normal float32, 2^-126, and so may the result: (kv_len + 1) * 2^-126.
//
// So, besides item F's element terms, atol = M * [V narrow] (2^(1-prec_V) + kv_len *
// min_subnormal_V) + [V narrow] min_subnormal_V + [q narrower than V] min_subnormal_q +
// (kv_len + 1) * 2^-126 and rtol = [V narrow] 2^(1-prec_V) + [q narrower than V]
// 2^(1-prec_q). For bfloat16 q and V that is 2^-7 * M plus one bf16 ulp of the value.
Tolerance tolerance_for(DType q_dtype, DType v_dtype, double max_abs_v, int64_t max_kv_len) {
  Tolerance tol;
  double abs_scale = 0.0;
  double abs_floor = static_cast<double>(max_kv_len + 1) * std::ldexp(1.0, -126);
  if (v_dtype != DType::kFloat32) {
    const double ulp = std::ldexp(1.0, 1 - precision_bits(v_dtype));
    abs_scale += ulp + static_cast<double>(max_kv_len) * min_subnormal(v_dtype);
    abs_floor += min_subnormal(v_dtype);
    tol.rtol += ulp;
  }
  if (precision_bits(q_dtype) < precision_bits(v_dtype)) {
    tol.rtol += std::ldexp(1.0, 1 - precision_bits(q_dtype));
    abs_floor += min_subnormal(q_dtype);
  }
  tol.atol = abs_scale * max_abs_v + abs_floor;
  tol.value_scale = max_abs_v;
  return tol;
}

double Tolerance::max_element_atol() const {
  double best = 0.0;
  if (element_atol) {
    for (double x : *element_atol) best = std::max(best, x);
  }
  return best;
}

Tolerance Tolerance::scaled(double k) const {
  Tolerance t;
  t.atol = atol * k;
  t.rtol = rtol * k;
  t.value_scale = value_scale;
  if (element_atol) {
    auto more = std::make_shared<std::vector<double>>(*element_atol);
    for (double& x : *more) x *= k;
    t.element_atol = std::move(more);
  }
  return t;
}

}  // namespace rpa
