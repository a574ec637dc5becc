// A scalar parameter (a scale, a soft cap) as the kernels compute with it: rounded to float32,
// then 0 where that lies below float32's least normal 2^-126, as TPUs flush subnormals (and
// rpa's kernel runs with them flushed). The definition takes the same value, so a scale of
// 3e-322 or 1e-40 is a scale of 0 there too: a -inf query times it is NaN in both. A soft cap
// it makes 0 divides 0 by 0, so strict mode rejects it, with the message below.
#pragma once

#include <cmath>
#include <string>

#include "core/python_repr.h"

namespace rpa {

inline float float32_scalar(double x) {
  const auto f = static_cast<float>(x);
  return std::fabs(f) < 0x1p-126f ? 0.0f : f;
}

// strict soft_cap_zero's message for a nonzero cap that float32_scalar makes 0.
inline std::string soft_cap_flushed_message(double cap) {
  return "soft_cap=" + py_float_repr(cap) + " must not be 0.0 (it is " +
         (static_cast<float>(cap) == 0.0f ? "0.0" : "subnormal") + " as a float32).";
}

}  // namespace rpa
