// The options of the attention arithmetic that the math core knows (DESIGN.md section 16):
// what each dialect's parameters mean once its arrays are a PagedKvView. The jax dialect adds
// the mask value and scales K and V before the products; tpu-inference v3 replaces masked
// logits, scales the logits by sm_scale * k_scale * q_scale and P.V by v_scale, can quantize
// q to the KV dtype, can turn the causal mask off, and (hd64) adds a sink logit per q head.
#pragma once

#include <cstdint>
#include <optional>

#include "core/dialect.h"
#include "core/dtype.h"
#include "core/float32_scalar.h"
#include "core/jax_params.h"
#include "core/v3_params.h"

namespace rpa {

struct AttentionMath {
  double logit_scale = 1.0;  // multiplies q.K
  std::optional<int64_t> sliding_window;  // keys t with q_pos - W < t are visible
  std::optional<double> soft_cap;
  bool causal = true;            // keys t <= q_pos only
  double mask_value = kDefaultMaskValue;
  bool mask_replaces = false;    // masked logit = mask_value (v3), else logit + mask_value (jax)
  std::optional<double> k_scale;    // jax: K_eff = round_to(q dtype, K * k_scale) before q.K
  std::optional<double> v_scale;    // jax: V_eff likewise before p.V
  std::optional<double> out_scale;  // v3 v_scale: multiplies p.V
  // v3 q_scale: q becomes round_to(KV dtype, clip(round_to(q dtype, q / round_to(q dtype,
  // q_scale)), finfo(KV))) before q.K (as the kernel quantizes it: JAX divides by the scale
  // as a scalar of q's dtype); logit_scale then includes q_scale unrounded.
  std::optional<double> q_quant_scale;
  // hd64 attention_sink [Hq] (float32), or null: one more logit per q head, with no value,
  // in every row's softmax denominator (-inf: no sink). Points into the call's arrays.
  const float* sink = nullptr;
};

// The jax dialect's parameters (section 2).
inline AttentionMath attention_math(const Params& p) {
  AttentionMath m;
  m.logit_scale = float32_scalar(p.sm_scale);
  m.sliding_window = p.sliding_window;
  m.soft_cap = p.soft_cap;
  m.mask_value = p.effective_mask_value();
  m.k_scale = p.k_scale;
  m.v_scale = p.v_scale;
  return m;
}

// finfo(dtype).min of the float32 and bfloat16 out dtypes, and hd64's DEFAULT_MASK_VALUE.
inline constexpr double kFloat32Min = -3.4028234663852886e38;
inline constexpr double kBFloat16Min = -3.3895313892515355e38;

// v3's default out_dtype: float32 for float32 queries, else bfloat16 (kernel.py).
inline DType v3_default_out_dtype(DType q) { return q == DType::kFloat32 ? DType::kFloat32 : DType::kBFloat16; }

// A v3 dialect's keywords for queries of dtype q (v3-contract.md sections 1 and 3c). The
// scale of the logits is sm_scale * k_scale * q_scale multiplied in double, as the kernel
// multiplies its Python floats, then the float32 it multiplies the scores by (float32_scalar:
// a k_scale of 3e-322 is a scale of 0, so a -inf query gives NaN; fuzz_raw_inputs found the
// definition scaling by the double and answering 0.5 where the kernel gave NaN).
inline AttentionMath attention_math(Dialect d, const V3Params& p, DType q) {
  AttentionMath m;
  m.logit_scale = float32_scalar(p.sm_scale * p.k_scale.value_or(1.0) * p.q_scale.value_or(1.0));
  m.sliding_window = p.sliding_window;
  m.soft_cap = p.soft_cap;
  const bool hd64 = d == Dialect::kTpuInferenceV3Hd64;
  m.causal = hd64 || p.use_causal_mask;
  const DType out = p.out_dtype.value_or(v3_default_out_dtype(q));
  m.mask_value = p.mask_value.value_or(hd64 ? kDefaultMaskValue
                                            : (out == DType::kFloat32 ? kFloat32Min : kBFloat16Min));
  m.mask_replaces = true;
  m.out_scale = p.v_scale;
  m.q_quant_scale = p.q_scale;
  return m;
}

}  // namespace rpa
