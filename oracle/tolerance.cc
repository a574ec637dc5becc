#include "oracle/tolerance.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

namespace rpa {

int precision_bits(DType t) {
  switch (t) {
    case DType::kFloat32: return 24;
    case DType::kBFloat16: return 8;
    case DType::kFloat8E4M3FN: return 4;
    case DType::kFloat8E5M2: return 3;
    default: throw std::logic_error("precision_bits: not a kernel float dtype");
  }
}

namespace {

// Smallest positive subnormal: below it, values round to 0 regardless of precision.
double min_subnormal(DType t) {
  switch (t) {
    case DType::kFloat32: return std::ldexp(1.0, -149);
    case DType::kBFloat16: return std::ldexp(1.0, -133);
    case DType::kFloat8E4M3FN: return std::ldexp(1.0, -9);
    case DType::kFloat8E5M2: return std::ldexp(1.0, -16);
    default: throw std::logic_error("min_subnormal: not a kernel float dtype");
  }
}

}  // namespace

// Every output is o = sum_t p_t v_t with p_t >= 0, sum_t p_t = 1, so |o| <= max|V_eff| =: M.
// Two correct implementations differ only by where and how they round:
//
// 1. Float32 arithmetic (logits, exp, the running sums of an online softmax): relative
//    errors of a few float32 ulps in each p_t, amplified by the logit's magnitude. DESIGN.md
//    section 6 fixes the budget at 1e-5 * M, about 84 float32 ulps of M; it holds for
//    logits of moderate size (|s| up to ~50 after scaling), which softmax attention keeps.
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
// So atol = M * (1e-5 + [V narrow] (2^(1-prec_V) + kv_len * min_subnormal_V))
//           + [V narrow] min_subnormal_V + [q narrower than V] min_subnormal_q
//           + (kv_len + 1) * 2^-126 and
// rtol = [V narrow] 2^(1-prec_V) + [q narrower than V] 2^(1-prec_q). For float32 this is the
// DESIGN target of 1e-5 * M; for bfloat16 q and V it is 2^-7 * M plus one bf16 ulp of the
// value.
Tolerance tolerance_for(DType q_dtype, DType v_dtype, double max_abs_v, int64_t max_kv_len) {
  Tolerance tol;
  double abs_scale = 1e-5;
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
  return tol;
}

// 5. Large logits: a float32 dot product of length D is off by up to about 2^-24 *
//    sum_d |q_d k_d| (times |sm_scale|), measured 1.3e-4 at a bound of 2432 against JAX's
//    own float32 reference. Softmax turns logit errors of at most e into output errors of
//    at most 2 e M (dp_t = p_t (ds_t - sum_u p_u ds_u)), so atol grows by
//    2 * 2^-24 * bound * M. For |s| ~ 50 that is 6e-6 M, within the budget of 1.; logits
//    in the hundreds (JAX's cross-check found one near-tied row at |s| ~ 400 off by 2.7e-5 M)
//    need it.
Tolerance tolerance_for_case(const Inputs& in, const Params& p, const ReferenceResult& r) {
  const DType v_dtype = p.v_scale ? in.q.dtype() : in.kv_pages.dtype();
  Tolerance tol = tolerance_for(in.q.dtype(), v_dtype, r.max_abs_v_eff, r.max_kv_len);
  tol.atol += 2.0 * std::ldexp(1.0, -24) * r.max_logit_abs_sum * r.max_abs_v_eff;
  return tol;
}

// The literal schedule against the Pallas kernel (DESIGN.md sections 5 and 14). Both run
// the same program: the same KV blocks in the same order in each buffer half, the same
// masks, casts and float32 update formulas (m, l, alpha, beta, the accumulator). What can
// still differ:
// a. the order of float32 summation inside q.K (head_dim terms), s.V and the row sum l
//    (bkv * S terms each): XLA's CPU dot and Eigen's loops may group the terms differently;
// b. exp and tanh: XLA's and Eigen's / libm's implementations are a few float32 ulps apart;
// c. for a q narrower than float32, the final cast, where a float32 value a few ulps away
//    rounds to the neighbouring ulp of q's dtype.
// (a) in s.V and l, and (b), are relative errors of a few float32 ulps in each weight, and
// so in each output: 2^-19 (32 ulps) of M = max |V_eff| and of the value bound them with
// room. (a) in a logit is a reordering of the same float32 terms, a few ulps of
// sum_d |q_d K_d|, which softmax turns into at most twice that times M: allowed here only
// through the 32 ulps above; the measured differences against the Pallas kernel (README)
// stay within half of them on every case tried.
// (c): one ulp of q's dtype. M is taken over every page slot (any step may read any page).
// Compare: the reference tolerance starts at 1e-5 M (168 ulps) for float32 and 2^-7 M for
// bfloat16.
Tolerance schedule_tolerance(const Inputs& in, const Params& p) {
  const int64_t d = std::max<int64_t>(in.q.dim(2), 1);
  // kv_pages [P, S, 2 Hkv, D]: V heads are the odd ones; scaled and cast as V_eff.
  const DType kt = in.kv_pages.dtype();
  const int64_t heads = in.kv_pages.numel() / d;
  double max_v = 0.0;
  for (int64_t h = 1; h < heads; h += 2) {
    for (int64_t c = 0; c < d; ++c) {
      double x = load_float(kt, in.kv_pages.data(), h * d + c);
      if (p.v_scale) {
        x = round_to(in.q.dtype(), static_cast<float>(x) * static_cast<float>(*p.v_scale));
      }
      if (std::isfinite(x)) max_v = std::max(max_v, std::fabs(x));
    }
  }
  Tolerance tol;
  tol.atol = std::ldexp(1.0, -19) * max_v;
  tol.rtol = std::ldexp(1.0, -19);
  if (in.q.dtype() != DType::kFloat32) {
    tol.rtol += std::ldexp(1.0, 1 - precision_bits(in.q.dtype()));
  }
  return tol;
}

}  // namespace rpa
