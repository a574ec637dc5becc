// The attention arithmetic of a tpu-inference v3 call (core/attention_math.h) from its
// keywords, and the out dtype and mask value defaults it depends on.
#pragma once

#include "core/attention_math.h"
#include "core/dialect.h"
#include "core/dtype.h"
#include "core/float32_scalar.h"
#include "core/v3_params.h"

namespace rpa {

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
