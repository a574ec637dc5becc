// The options of the attention arithmetic that the math core knows (DESIGN.md section 16):
// what each dialect's parameters mean once its arrays are a PagedKvView. The jax dialect adds
// the mask value and scales K and V before the products; tpu-inference v3 replaces masked
// logits, scales the logits by sm_scale * k_scale * q_scale and P.V by v_scale, can quantize
// q to the KV dtype, can turn the causal mask off, and (hd64) adds a sink logit per q head.
// Each dialect makes one from its parameters: core/jax_attention_math.h,
// core/v3_attention_math.h.
#pragma once

#include <cstdint>
#include <optional>

namespace rpa {

// -0.7 * float32 max, as JAX's DEFAULT_MASK_VALUE (computed in double): the jax dialect's
// and hd64's default mask value.
inline constexpr double kDefaultMaskValue = -0.7 * 3.4028234663852886e38;

// The largest mask value for which the tiled kernel's zero-padded KV slots (logit exactly
// mask_value) weigh exactly 0 in float32 against any logit of magnitude below 1e29: strict
// validation's bound, and the kernel's condition for leaving them out.
inline constexpr double kMaxExactMaskValue = -1e30;

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

}  // namespace rpa
