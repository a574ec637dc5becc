// The attention arithmetic of a jax call (core/attention_math.h) from its parameters.
#pragma once

#include "core/attention_math.h"
#include "core/float32_scalar.h"
#include "core/jax_params.h"

namespace rpa {

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

}  // namespace rpa
